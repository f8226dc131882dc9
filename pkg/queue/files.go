package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// files is the file backend (SPEC §3.1): queue/<kind>/<state>/<id>.json.
// The Queue's exported methods have checked ids and states before a call
// reaches it.
type files struct{ *Queue }

// put writes b as state/<id>.json, replacing any file of that name there.
func (q files) put(state, id string, b []byte) error {
	return atomicfile.WriteFile(q.Path(state, id), b, 0o600)
}

// putOnce creates state/<id>.json only if id is in none of the states.
func (q files) putOnce(state, id string, v any) error {
	if s, ok := q.find(id); ok {
		return fmt.Errorf("put %s %s: %w in %s", q.kind, id, ErrExists, s)
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	if err := atomicfile.CreateNoReplace(q.Path(state, id), b, 0o600); err != nil {
		if errors.Is(err, atomicfile.ErrExists) {
			return fmt.Errorf("put %s %s: %w in %s", q.kind, id, ErrExists, state)
		}
		return err
	}
	return nil
}

func (q files) find(id string) (string, bool) {
	for _, s := range q.states {
		if _, err := os.Lstat(q.Path(s, id)); err == nil {
			return s, true
		}
	}
	return "", false
}

func (q files) exists(state, id string) bool {
	_, err := os.Lstat(q.Path(state, id))
	return err == nil
}

// claim is a no-replace rename; the holder is not recorded (one machine:
// the process that renamed owns the file).
func (q files) claim(from, to, id string, _ store.Claim) error {
	err := atomicfile.RenameNoReplace(q.Path(from, id), q.Path(to, id))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("claim %s %s: %w", q.kind, id, ErrTaken)
	case errors.Is(err, atomicfile.ErrExists):
		return fmt.Errorf("claim %s %s: %w in %s", q.kind, id, ErrExists, to)
	}
	return fmt.Errorf("claim %s %s: %w", q.kind, id, err)
}

// finish is a plain move: on one machine only the claimant's own role
// moves a claimed file on.
func (q files) finish(from, to, id string, _ store.Claim) error { return q.move(from, to, id) }

func (q files) move(from, to, id string) error {
	if err := os.Rename(q.Path(from, id), q.Path(to, id)); err != nil {
		return fmt.Errorf("move %s %s %s→%s: %w", q.kind, id, from, to, err)
	}
	return nil
}

func (q files) remove(state, id string) error {
	if err := os.Remove(q.Path(state, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s %s: %w", q.kind, id, err)
	}
	return nil
}

func (q files) read(state, id string) ([]byte, error) {
	return ReadLimited(q.Path(state, id), q.MaxSize)
}

func (q files) list(state string) ([]Entry, error) {
	dir := q.Dir(state)
	ents, err := readDirUnsorted(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	out := make([]Entry, 0, len(ents))
	seen := make(map[string]stamp, len(ents)) // files found valid (poison.go)
	for _, de := range ents {
		name := de.Name()
		if atomicfile.IsTemp(name) {
			continue
		}
		if state == layout.Rejected {
			if strings.HasSuffix(name, ".reason") || de.IsDir() {
				continue
			}
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			if state != layout.Rejected {
				q.rejectFile(state, name, "not a .json file")
			}
			continue
		}
		if !ids.Valid(id) {
			if state != layout.Rejected {
				q.rejectFile(state, name, "unsafe id: "+ids.Check(id).Error())
			}
			continue
		}
		if !de.Type().IsRegular() && state != layout.Rejected {
			q.rejectFile(state, name, notRegular(de.Type()))
			continue
		}
		// The stamp is taken before the read: a file replaced meanwhile
		// has a new inode, so a stale stamp only costs a re-validation.
		var st stamp
		fi, ierr := de.Info()
		if ierr == nil {
			st = stampOf(fi)
		}
		path := filepath.Join(dir, name)
		b, err := ReadLimited(path, q.MaxSize)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if state != layout.Rejected {
				q.rejectFile(state, name, err.Error())
			}
			continue
		}
		var h header
		if json.Unmarshal(b, &h) != nil { // checks the whole file's syntax first
			if state != layout.Rejected {
				q.rejectFile(state, name, "not valid JSON")
			}
			continue
		}
		if state != layout.Rejected {
			if ierr != nil || !q.valid.known(state, name, st) {
				if err := q.CheckDocument(id, b); err != nil {
					q.rejectFile(state, name, err.Error())
					continue
				}
			}
			if ierr == nil {
				seen[name] = st
			}
		}
		e := Entry{ID: id, State: state, Path: path, Priority: h.Priority, Data: b, Checked: state != layout.Rejected}
		if t, err := time.Parse(time.RFC3339Nano, h.CreatedAt); err == nil {
			e.CreatedAt = t
		} else if ierr == nil {
			e.CreatedAt = fi.ModTime()
		}
		out = append(out, e)
	}
	if state != layout.Rejected {
		q.valid.keep(state, seen)
	}
	SortEntries(out)
	return out, nil
}

func (q files) ids(state string) ([]string, error) {
	ents, err := readDirUnsorted(q.Dir(state))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, de := range ents {
		if !de.Type().IsRegular() {
			continue // poison: Count and List reject it
		}
		if id, ok := strings.CutSuffix(de.Name(), ".json"); ok && !atomicfile.IsTemp(de.Name()) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (q files) reject(state, id, reason string) error {
	return q.rejectFile(state, id+".json", reason)
}

func (q files) rejectFile(state, name, reason string) error {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return fmt.Errorf("reject %s: bad file name %q", q.kind, name)
	}
	src := filepath.Join(q.Dir(state), name)
	rejDir := q.Dir(layout.Rejected)
	return rejectInto(src, rejDir, name, reason, q.em)
}

func (q files) sweepTemps(age time.Duration, now time.Time) int {
	n := 0
	for _, s := range q.states {
		m, _ := atomicfile.SweepOldTemps(q.Dir(s), age, now)
		n += m
	}
	return n
}

func rejectInto(src, rejDir, name, reason string, em *eventlog.Emitter) error {
	if err := os.MkdirAll(rejDir, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(rejDir, name)
	if _, err := os.Lstat(dst); err == nil {
		// Keep earlier rejects: suffix a timestamp.
		dst = filepath.Join(rejDir, fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	}
	// Reason first: a crash leaves a reason without its file at worst, never
	// a rejected file without a reason.
	if err := atomicfile.WriteFile(dst+".reason", []byte(reason+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		os.Remove(dst + ".reason")
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reject %s: %w", src, err)
	}
	em.Emit("system.file_rejected", map[string]any{"path": dst, "reason": reason})
	return nil
}

// readDirUnsorted is os.ReadDir without its sort by name: List orders its
// entries itself, and IDs and Count need no order.
func readDirUnsorted(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
