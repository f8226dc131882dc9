package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// MaxDocSize is the largest queue document or value file read (SPEC §8).
const MaxDocSize = 1 << 20

// queueDirs is one queue kind on disk (SPEC §3.1): queue/<kind>/<state>/<id>.json.
// Files are messages and directories are states; a file appears whole
// (write-then-rename) and a rejected one sits in rejected/ with a .reason
// beside it. Every write goes through the store's journal (tx.go); queueDirs
// only reads, writes one file, and rejects the poison its listing meets.
type queueDirs struct {
	l      layout.Layout
	kind   string
	states []string
	log    *eventlog.File // system.file_rejected for poison
	ro     bool           // read-only: poison is skipped, not moved
}

func (q *queueDirs) dir(state string) string { return q.l.QueueState(q.kind, state) }

func (q *queueDirs) path(state, id string) string { return filepath.Join(q.dir(state), id+".json") }

// find returns the state holding id, if any.
func (q *queueDirs) find(id string) (string, bool) {
	for _, s := range q.states {
		if _, err := os.Lstat(q.path(s, id)); err == nil {
			return s, true
		}
	}
	return "", false
}

// read returns state/<id>.json; it never follows a symlink or blocks on a
// FIFO (atomicfile.ReadLimited).
func (q *queueDirs) read(state, id string) ([]byte, error) {
	return atomicfile.ReadLimited(q.path(state, id), MaxDocSize)
}

// put writes state/<id>.json, replacing any file of that name there.
func (q *queueDirs) put(state, id string, b []byte) error {
	return atomicfile.WriteFile(q.path(state, id), b, 0o600)
}

// putOnce creates state/<id>.json only if id is in none of the states.
func (q *queueDirs) putOnce(state, id string, b []byte) error {
	if s, ok := q.find(id); ok {
		return fmt.Errorf("put %s %s: %w in %s", q.kind, id, store.ErrExists, s)
	}
	if err := atomicfile.CreateNoReplace(q.path(state, id), b, 0o600); err != nil {
		if errors.Is(err, atomicfile.ErrExists) {
			return fmt.Errorf("put %s %s: %w in %s", q.kind, id, store.ErrExists, state)
		}
		return err
	}
	return nil
}

// list returns the documents of state in the store's order. Dot-temps and
// .reason files are not entries; poison (a name that is no safe
// <id>.json, not a regular file, too large, not a JSON object) is moved to
// rejected/ on the way and not returned, so it never blocks the queue (in
// rejected/ it is listed with its reason and no data). A file that
// vanishes between listing and reading is skipped.
func (q *queueDirs) list(state string) ([]store.Doc, error) {
	d, err := os.Open(q.dir(state))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", q.kind, state, err)
	}
	ents, err := d.ReadDir(-1) // unsorted: the store's order is by header
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", q.kind, state, err)
	}
	rejected := state == layout.Rejected
	out := make([]store.Doc, 0, len(ents))
	for _, de := range ents {
		name := de.Name()
		if atomicfile.IsTemp(name) {
			continue
		}
		id, reason := poisonName(name)
		if rejected && reason != "" {
			continue // a .reason, or a name with no id to give
		}
		if reason == "" && !de.Type().IsRegular() {
			reason = notRegular(de.Type())
		}
		doc := store.Doc{Queue: q.kind, State: state, ID: id}
		if reason == "" {
			doc.Data, err = atomicfile.ReadLimited(filepath.Join(q.dir(state), name), MaxDocSize)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				doc.Priority, doc.CreatedAt, err = store.ParseHeader(doc.Data)
				if err != nil {
					err = errors.New("not valid JSON")
				}
			}
			if err != nil {
				reason = err.Error()
			}
		}
		switch {
		case reason != "" && !rejected:
			if !q.ro {
				q.rejectFile(state, name, reason)
			}
			continue
		case reason != "":
			doc.Data = nil // rejected poison is listed by its reason alone
		}
		if doc.CreatedAt.IsZero() {
			if fi, err := de.Info(); err == nil {
				doc.CreatedAt = fi.ModTime()
			}
		}
		if rejected {
			doc.Reason = q.reason(id)
		}
		out = append(out, doc)
	}
	sortDocs(out)
	return out, nil
}

// sortDocs orders documents as every store lists them: priority, then
// created_at (oldest first), then id.
func sortDocs(ds []store.Doc) {
	slices.SortStableFunc(ds, func(a, b store.Doc) int {
		if ra, rb := store.PriorityRank(a.Priority), store.PriorityRank(b.Priority); ra != rb {
			return ra - rb
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// reason is why rejected/<id>.json was rejected.
func (q *queueDirs) reason(id string) string {
	r, _ := os.ReadFile(q.path(layout.Rejected, id) + ".reason")
	return strings.TrimSpace(string(r))
}

// poisonName returns the id a directory entry name holds, or why it holds
// none (<safe id>.json).
func poisonName(name string) (id, reason string) {
	id, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return "", "not a .json file"
	}
	if err := ids.Check(id); err != nil {
		return "", "unsafe id: " + err.Error()
	}
	return id, ""
}

// notRegular describes a non-regular entry for its .reason.
func notRegular(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "not a regular file (a directory)"
	case m&fs.ModeSymlink != 0:
		return "not a regular file (symlink)"
	case m&fs.ModeNamedPipe != 0:
		return "not a regular file (FIFO)"
	}
	return "not a regular file"
}

// reject moves state/<id>.json to rejected/ with its reason (a journaled
// Reject: its transaction emits what its caller asked for). One already
// gone is not an error.
func (q *queueDirs) reject(state, id, reason string) error {
	_, err := q.moveRejected(state, id+".json", reason)
	return err
}

// rejectFile moves the poison file called name (one directory entry) to
// rejected/ and emits system.file_rejected.
func (q *queueDirs) rejectFile(state, name, reason string) error {
	dst, err := q.moveRejected(state, name, reason)
	if err != nil || dst == "" {
		return err
	}
	return q.log.Append("system.file_rejected", "store", map[string]any{"path": dst, "reason": reason})
}

// moveRejected moves state/name into rejected/, writing <name>.reason
// first: a crash leaves a reason without its file at worst, never a
// rejected file without a reason. An earlier reject of the same name is
// kept (the new one gets a timestamp suffix). It returns the new path, ""
// when the file was already gone.
func (q *queueDirs) moveRejected(state, name, reason string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return "", fmt.Errorf("reject %s: bad file name %q", q.kind, name)
	}
	src, rejDir := filepath.Join(q.dir(state), name), q.dir(layout.Rejected)
	if err := os.MkdirAll(rejDir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(rejDir, name)
	if _, err := os.Lstat(dst); err == nil {
		dst = filepath.Join(rejDir, fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	}
	if err := atomicfile.WriteFile(dst+".reason", []byte(reason+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(src, dst); err != nil {
		os.Remove(dst + ".reason")
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("reject %s: %w", src, err)
	}
	return dst, nil
}
