// Package sessions owns state/sessions.json, the registry of live soldier
// sessions (SPEC §3.3, §9.12). Every read-modify-write holds an exclusive
// flock on state/sessions.lock, so generals and the chamberlain never lose
// each other's updates. Each write replaces the file whole (temp, fsync,
// rename, directory fsync), so a reader needs no lock: it sees one version
// or the next, never a torn one.
package sessions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// Entry is one registered soldier session.
type Entry struct {
	ID        string    `json:"id"`
	TaskID    string    `json:"task_id"`
	General   string    `json:"general"`
	StartedAt time.Time `json:"started_at"`
}

// Registry is the sessions.json file and its lock.
type Registry struct {
	l    layout.Layout
	path string
	lock string
}

// New returns the registry of layout l.
func New(l layout.Layout) *Registry {
	return &Registry{l: l, path: l.SessionsJSON(), lock: l.SessionsLock()}
}

func (r *Registry) read() ([]Entry, error) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s: %w", r.path, err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	var es []Entry
	if err := json.Unmarshal(b, &es); err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.path, err)
	}
	return es, nil
}

func (r *Registry) write(es []Entry) error {
	if es == nil {
		es = []Entry{}
	}
	b, err := json.MarshalIndent(es, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", r.path, err)
	}
	return atomicfile.Replace(r.path, append(b, '\n'), 0o600)
}

// Update runs fn on the current entries under the exclusive lock and writes
// back what it returns (unless fn returns an error). fn may do other work
// that must be atomic with respect to the registry (the chamberlain lists
// tmux sessions inside it, §9.12).
func (r *Registry) Update(fn func([]Entry) ([]Entry, error)) error {
	return lockfile.With(r.lock, func() error {
		es, err := r.read()
		if err != nil {
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if !errors.As(err, &syn) && !errors.As(err, &typ) {
				return err // unreadable now (EIO, EMFILE): never wipe the entries
			}
			// A corrupt registry is rebuilt from what is true on disk
			// (Rebuild) rather than blocking every general or calling live
			// soldiers orphans.
			es = Rebuild(r.l)
		}
		out, err := fn(es)
		if err != nil {
			return err
		}
		return r.write(out)
	})
}

// Add registers e, replacing an entry with the same id.
func (r *Registry) Add(e Entry) error {
	return r.Update(func(es []Entry) ([]Entry, error) {
		out := es[:0:0]
		for _, x := range es {
			if x.ID != e.ID {
				out = append(out, x)
			}
		}
		return append(out, e), nil
	})
}

// Remove deregisters id (missing is fine).
func (r *Registry) Remove(id string) error {
	return r.Update(func(es []Entry) ([]Entry, error) {
		out := es[:0:0]
		for _, x := range es {
			if x.ID != id {
				out = append(out, x)
			}
		}
		return out, nil
	})
}

// Replace swaps the whole registry for es.
func (r *Registry) Replace(es []Entry) error {
	return r.Update(func([]Entry) ([]Entry, error) { return es, nil })
}

// List returns the entries (read under the lock). A registry that does not
// decode is rebuilt (Rebuild) and written back first.
func (r *Registry) List() ([]Entry, error) {
	var out []Entry
	err := lockfile.With(r.lock, func() error {
		var err error
		out, err = r.read()
		if corrupt(err) {
			out = Rebuild(r.l)
			return r.write(out)
		}
		return err
	})
	return out, err
}

// Read returns the entries without taking the lock, for a reader that must
// not write (the chamberlain's read-only observation): a registry that does
// not decode is an error here, not rebuilt.
func (r *Registry) Read() ([]Entry, error) { return r.read() }

// corrupt reports whether err says the registry's bytes do not decode.
func corrupt(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ)
}
