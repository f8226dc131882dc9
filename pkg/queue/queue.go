// Package queue owns the file queues under queue/ (SPEC §3.1, seed 003): it is
// the only code that writes, claims, moves or rejects queue files. Files are
// messages and directories are states; a file appears whole (write-then-
// rename), a claim is a no-replace rename, and a poison file goes to
// rejected/ with a .reason beside it so it never blocks the queue.
//
// Drive it with one Queue per kind (events, tasks, messages):
//
//	q := queue.New(layout, layout.QTasks, emitter)
//	q.PutOnce(layout.Pending, task.ID, task)
//	entries, _ := q.List(layout.Pending)   // priority, then oldest
//	err := q.Claim(layout.Pending, layout.InProgress, id) // ErrTaken for losers
//
// External events enter only through an Admitter (admit.go), which refuses
// an id already queued or in the seen index (seen.go). List and Count move
// any poison they meet to rejected/ (poison.go). A Batch writes several
// files of any queues with one group commit (batch.go).
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// DefaultMaxSize is the largest queue file read (SPEC §8).
const DefaultMaxSize = 1 << 20

var (
	// ErrTaken is returned by Claim when another claimant won the file (or it
	// no longer exists in the source state).
	ErrTaken = errors.New("already taken")
	// ErrExists is returned by PutOnce (and no-replace moves) when the id is
	// already present.
	ErrExists = errors.New("already exists")
)

// Queue is one queue kind (events, tasks or messages).
type Queue struct {
	l       layout.Layout
	kind    string
	states  []string
	em      *eventlog.Emitter
	MaxSize int64
	valid   validCache
}

// New returns the queue of kind (layout.QEvents, QTasks or QMessages).
// em receives system.file_rejected events; it may be nil.
func New(l layout.Layout, kind string, em *eventlog.Emitter) *Queue {
	return &Queue{l: l, kind: kind, states: layout.QueueStates[kind], em: em, MaxSize: DefaultMaxSize}
}

// Kind returns the queue kind.
func (q *Queue) Kind() string { return q.kind }

// Dir returns the directory of a state.
func (q *Queue) Dir(state string) string { return q.l.QueueState(q.kind, state) }

// Path returns the file path of id in state. It does not validate id; every
// exported operation does.
func (q *Queue) Path(state, id string) string { return filepath.Join(q.Dir(state), id+".json") }

func (q *Queue) checkState(state string) error {
	for _, s := range q.states {
		if s == state {
			return nil
		}
	}
	return fmt.Errorf("queue %s has no state %q", q.kind, state)
}

// checkPut checks the id and state of a write.
func (q *Queue) checkPut(state, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("put %s/%s: %w", q.kind, state, err)
	}
	return q.checkState(state)
}

func encode(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		if !json.Valid(b) {
			return nil, errors.New("not valid JSON")
		}
		return b, nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Put writes v (a value or raw JSON bytes) as state/<id>.json, replacing any
// file of that name there. Use it to rewrite a file its owner holds.
func (q *Queue) Put(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return atomicfile.WriteFile(q.Path(state, id), b, 0o600)
}

// PutOnce creates state/<id>.json only if id is in none of the queue's states
// (rejected/ included, SPEC §9.3). It returns an error wrapping ErrExists
// otherwise, leaving everything untouched.
func (q *Queue) PutOnce(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	if s, ok := q.Find(id); ok {
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

// Find returns the state holding id, if any.
func (q *Queue) Find(id string) (string, bool) {
	if !ids.Valid(id) {
		return "", false
	}
	for _, s := range q.states {
		if _, err := os.Lstat(q.Path(s, id)); err == nil {
			return s, true
		}
	}
	return "", false
}

// Exists reports whether id is in state.
func (q *Queue) Exists(state, id string) bool {
	if !ids.Valid(id) {
		return false
	}
	_, err := os.Lstat(q.Path(state, id))
	return err == nil
}

// Claim renames from/<id> to to/<id> without replacing. Exactly one of many
// concurrent claimants succeeds; the others get ErrTaken.
func (q *Queue) Claim(from, to, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("claim %s: %w", q.kind, err)
	}
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

// Move renames from/<id> to to/<id>, replacing a file of that name in to/ (a
// repeated step after a crash lands on the same name). A missing source
// returns an error satisfying fs.ErrNotExist.
func (q *Queue) Move(from, to, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("move %s: %w", q.kind, err)
	}
	if err := os.Rename(q.Path(from, id), q.Path(to, id)); err != nil {
		return fmt.Errorf("move %s %s %s→%s: %w", q.kind, id, from, to, err)
	}
	return nil
}

// Remove deletes state/<id>.json; a missing file is not an error.
func (q *Queue) Remove(state, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("remove %s: %w", q.kind, err)
	}
	if err := os.Remove(q.Path(state, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s %s: %w", q.kind, id, err)
	}
	return nil
}

// Read returns the bytes of state/<id>.json, refusing files over MaxSize.
func (q *Queue) Read(state, id string) ([]byte, error) {
	if err := ids.Check(id); err != nil {
		return nil, fmt.Errorf("read %s: %w", q.kind, err)
	}
	return ReadLimited(q.Path(state, id), q.MaxSize)
}

// ReadJSON reads state/<id>.json into v.
func (q *Queue) ReadJSON(state, id string, v any) error {
	b, err := q.Read(state, id)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s %s: %w", q.kind, id, err)
	}
	return nil
}

// ReadLimited reads a regular file of at most max bytes: it never follows a
// symlink and never blocks on a FIFO planted in a queue directory
// (atomicfile.ReadLimited; atomicfile.ErrNotRegular, atomicfile.ErrTooLarge).
func ReadLimited(path string, max int64) ([]byte, error) {
	return atomicfile.ReadLimited(path, max)
}

// Entry is one listed queue file.
type Entry struct {
	ID        string
	State     string
	Path      string
	Priority  string
	CreatedAt time.Time
	Data      []byte
	// Checked: Data passed CheckDocument (List checks every entry it
	// returns outside rejected/, or remembers the same file version
	// passing), so a consumer may decode it without validating again.
	Checked bool
}

// Decode unmarshals the entry's data into v.
func (e Entry) Decode(v any) error { return json.Unmarshal(e.Data, v) }

type header struct {
	Priority  string `json:"priority"`
	CreatedAt string `json:"created_at"`
}

// PriorityRank orders priorities: high 0, normal 1, low 2, anything else 3.
func PriorityRank(p string) int {
	switch p {
	case "high":
		return 0
	case "normal":
		return 1
	case "low":
		return 2
	}
	return 3
}

// List returns the files of state ordered by priority (high → normal → low),
// then created_at (oldest first), then id (SPEC §9.23). Dot-files and
// .reason files are ignored. A poison entry (bad name, not a regular file,
// not JSON, too large, failing its kind's schema, id not its file name) is
// moved to rejected/ on the way and not returned. A file that vanishes
// between listing and reading is skipped.
func (q *Queue) List(state string) ([]Entry, error) {
	if err := q.checkState(state); err != nil {
		return nil, err
	}
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
				q.RejectFile(state, name, "not a .json file")
			}
			continue
		}
		if !ids.Valid(id) {
			if state != layout.Rejected {
				q.RejectFile(state, name, "unsafe id: "+ids.Check(id).Error())
			}
			continue
		}
		if !de.Type().IsRegular() && state != layout.Rejected {
			q.RejectFile(state, name, notRegular(de.Type()))
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
				q.RejectFile(state, name, err.Error())
			}
			continue
		}
		var h header
		if !json.Valid(b) || json.Unmarshal(b, &h) != nil {
			if state != layout.Rejected {
				q.RejectFile(state, name, "not valid JSON")
			}
			continue
		}
		if state != layout.Rejected {
			if ierr != nil || !q.valid.known(state, name, st) {
				if err := q.CheckDocument(id, b); err != nil {
					q.RejectFile(state, name, err.Error())
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

// SortEntries orders entries as List does (SPEC §9.23): priority (high →
// normal → low), then created_at (oldest first), then id.
func SortEntries(out []Entry) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := PriorityRank(a.Priority), PriorityRank(b.Priority); ra != rb {
			return ra < rb
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
}

// IDs returns the ids of the regular files in state, unordered and unread
// (cheap); it does not validate them (List and Count do).
func (q *Queue) IDs(state string) ([]string, error) {
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

// Reject moves state/<id>.json to rejected/ with a reason.
func (q *Queue) Reject(state, id, reason string) error {
	return q.RejectFile(state, id+".json", reason)
}

// RejectFile moves the file called name (any name found in the state dir) to
// rejected/, writes <name>.reason beside it and emits system.file_rejected.
// The name is taken from a directory listing, so it is a single path
// component; it is still checked.
func (q *Queue) RejectFile(state, name, reason string) error {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return fmt.Errorf("reject %s: bad file name %q", q.kind, name)
	}
	src := filepath.Join(q.Dir(state), name)
	rejDir := q.Dir(layout.Rejected)
	return rejectInto(src, rejDir, name, reason, q.em)
}

// RejectPath moves an arbitrary file (e.g. inbox/x.json) into rejDir with a
// reason file and a system.file_rejected event.
func RejectPath(src, rejDir, reason string, em *eventlog.Emitter) error {
	return rejectInto(src, rejDir, filepath.Base(src), reason, em)
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

// SweepTemps removes dot-temps older than age from every state directory.
func (q *Queue) SweepTemps(age time.Duration, now time.Time) int {
	n := 0
	for _, s := range q.states {
		m, _ := atomicfile.SweepOldTemps(q.Dir(s), age, now)
		n += m
	}
	return n
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
