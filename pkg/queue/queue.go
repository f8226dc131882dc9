// Package queue owns the queues of events, tasks and messages (SPEC §3.1,
// seed 003): it is the only code that writes, claims, moves or rejects
// queue documents. A Queue is one queue kind of a store.Store (the files
// store: queue/<kind>/<state>/<id>.json, directories as states;
// PostgreSQL: rows shared by every host), where a claim records its holder
// (host and attempt) and a group of changes is one transaction (Group).
//
// Drive it with one Queue per kind (events, tasks, messages):
//
//	q := queue.OnStore(st, layout, layout.QTasks, emitter, host)
//	q.PutOnce(layout.Pending, task.ID, task)
//	entries, _ := q.List(layout.Pending)   // priority, then oldest
//	err := q.Claim(layout.Pending, layout.InProgress, id) // ErrTaken for losers
//
// External events enter only through an Admitter (admit.go), which the
// store refuses for an id already queued or seen. List and Count reject
// any document its kind's schema refuses (poison.go), so poison never
// blocks a queue; Group runs a dispatch's steps as one transaction
// (group.go).
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// DefaultMaxSize is the largest queue document read (SPEC §8).
const DefaultMaxSize = 1 << 20

// StoreTimeout bounds each store call a Queue makes: the methods take no
// context, and a role must not hang on a database it cannot reach.
const StoreTimeout = 30 * time.Second

// The queue's errors are the store's.
var (
	// ErrTaken is returned by Claim when another claimant won the document
	// (or it no longer exists in the source state).
	ErrTaken = store.ErrTaken
	// ErrExists is returned by PutOnce when the id is already present.
	ErrExists = store.ErrExists
)

// Queue is one queue kind (events, tasks or messages) of a store.
type Queue struct {
	l       layout.Layout
	kind    string
	states  []string
	em      *eventlog.Emitter
	MaxSize int64
	st      store.Store
	host    string // the claim holder
}

// OnStore returns the queue of kind kept in st. host names this host in
// the claims it makes (Claim; ClaimAs names its own holder). em receives
// system.file_rejected events; it may be nil. l names where the files
// store keeps the queue (Dir, Path).
func OnStore(st store.Store, l layout.Layout, kind string, em *eventlog.Emitter, host string) *Queue {
	return &Queue{l: l, kind: kind, states: layout.QueueStates[kind], em: em, MaxSize: DefaultMaxSize, st: st, host: host}
}

// Kind returns the queue kind.
func (q *Queue) Kind() string { return q.kind }

// Dir returns the directory where the files store keeps a state.
func (q *Queue) Dir(state string) string { return q.l.QueueState(q.kind, state) }

// Path returns the file where the files store keeps id in state. It does
// not validate id; every exported operation does.
func (q *Queue) Path(state, id string) string { return filepath.Join(q.Dir(state), id+".json") }

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), StoreTimeout)
}

// notExist marks a store's ErrNotFound as fs.ErrNotExist too, the error
// callers of Move and Read test for.
type notExist struct{ error }

func (e notExist) Is(target error) bool { return target == fs.ErrNotExist }
func (e notExist) Unwrap() error        { return e.error }

func mapNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notExist{err}
	}
	return err
}

func (q *Queue) update(fn func(store.Tx) error) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Update(ctx, fn)
}

func (q *Queue) get(id string) (store.Doc, error) {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Get(ctx, q.kind, id)
}

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

// Put writes v (a value or raw JSON bytes) as id in state, wherever id
// was. Use it to rewrite a document its owner holds.
func (q *Queue) Put(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return q.update(func(tx store.Tx) error { return tx.Put(q.kind, state, id, b) })
}

// PutOnce creates id in state only if id is in none of the queue's states
// (rejected included, SPEC §9.3). It returns an error wrapping ErrExists
// otherwise, leaving everything untouched.
func (q *Queue) PutOnce(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return q.update(func(tx store.Tx) error { return tx.PutOnce(q.kind, state, id, b) })
}

// Find returns the state holding id, if any.
func (q *Queue) Find(id string) (string, bool) {
	if !ids.Valid(id) {
		return "", false
	}
	d, err := q.get(id)
	if err != nil {
		return "", false
	}
	return d.State, true
}

// Exists reports whether id is in state.
func (q *Queue) Exists(state, id string) bool {
	s, ok := q.Find(id)
	return ok && s == state
}

// Claim moves id from → to for this queue's host, attempt 0 (ClaimAs names
// one). Exactly one of many concurrent claimants succeeds; the others get
// ErrTaken.
func (q *Queue) Claim(from, to, id string) error {
	return q.ClaimAs(from, to, id, store.Claim{Holder: q.host})
}

// ClaimAs is Claim for holder c (a host and the task's attempt): only c
// may later FinishAs the document.
func (q *Queue) ClaimAs(from, to, id string, c store.Claim) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("claim %s: %w", q.kind, err)
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Claim(ctx, q.kind, from, to, id, c)
}

// FinishAs moves a claimed document on, only for the holder c that claimed
// it: anyone else gets an error wrapping store.ErrFenced, and a document
// no longer in from one satisfying fs.ErrNotExist.
func (q *Queue) FinishAs(from, to, id string, c store.Claim) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("finish %s: %w", q.kind, err)
	}
	return mapNotFound(q.update(func(tx store.Tx) error { return tx.Finish(q.kind, from, to, id, c) }))
}

// Move moves id from → to. A document not in from returns an error
// satisfying fs.ErrNotExist.
func (q *Queue) Move(from, to, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("move %s: %w", q.kind, err)
	}
	return mapNotFound(q.update(func(tx store.Tx) error { return tx.Move(q.kind, from, to, id) }))
}

// Remove deletes id from state; a missing document is not an error.
func (q *Queue) Remove(state, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("remove %s: %w", q.kind, err)
	}
	return q.update(func(tx store.Tx) error { return tx.Remove(q.kind, state, id) })
}

// Read returns the bytes of id in state, refusing documents over MaxSize.
// A document not in state gives an error satisfying fs.ErrNotExist.
func (q *Queue) Read(state, id string) ([]byte, error) {
	if err := ids.Check(id); err != nil {
		return nil, fmt.Errorf("read %s: %w", q.kind, err)
	}
	d, err := q.get(id)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", q.kind, id, mapNotFound(err))
	}
	if d.State != state {
		return nil, fmt.Errorf("read %s %s in %s: %w", q.kind, id, state, notExist{store.ErrNotFound})
	}
	if int64(len(d.Data)) > q.MaxSize {
		return nil, fmt.Errorf("read %s %s: %w", q.kind, id, atomicfile.ErrTooLarge)
	}
	return d.Data, nil
}

// ReadJSON reads id in state into v.
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
// symlink and never blocks on a FIFO (atomicfile.ReadLimited;
// atomicfile.ErrNotRegular, atomicfile.ErrTooLarge).
func ReadLimited(path string, max int64) ([]byte, error) {
	return atomicfile.ReadLimited(path, max)
}

// Entry is one listed queue document.
type Entry struct {
	ID        string
	State     string
	Priority  string
	CreatedAt time.Time
	Data      []byte
	// Checked: Data passed CheckDocument (List checks every entry it
	// returns outside rejected/), so a consumer may decode it without
	// validating again.
	Checked bool
}

// Decode unmarshals the entry's data into v.
func (e Entry) Decode(v any) error { return json.Unmarshal(e.Data, v) }

// List returns the documents of state ordered by priority (high → normal →
// low), then created_at (oldest first), then id (SPEC §9.23). A document
// outside rejected/ that its kind's schema refuses, or whose id is not its
// name, is moved to rejected/ on the way (with system.file_rejected in the
// same transaction) and not returned.
func (q *Queue) List(state string) ([]Entry, error) {
	if err := q.checkState(state); err != nil {
		return nil, err
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	docs, err := q.st.List(ctx, q.kind, state)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(docs))
	for _, d := range docs {
		if state != layout.Rejected {
			if reason := q.poison(d); reason != "" {
				q.Reject(state, d.ID, reason)
				continue
			}
		}
		out = append(out, Entry{ID: d.ID, State: state, Priority: d.Priority, CreatedAt: d.CreatedAt,
			Data: d.Data, Checked: state != layout.Rejected})
	}
	return out, nil
}

// IDs returns the ids in state, unchecked (List and Count check them).
func (q *Queue) IDs(state string) ([]string, error) {
	if err := q.checkState(state); err != nil {
		return nil, err
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	docs, err := q.st.List(ctx, q.kind, state)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.ID
	}
	return out, nil
}

// Count returns the number of valid entries in state: what List would
// return. Poison met on the way is rejected, so admission never counts a
// document no consumer can take.
func (q *Queue) Count(state string) int {
	es, err := q.List(state)
	if err != nil {
		return 0
	}
	return len(es)
}

// Reject moves id in state to rejected with a reason and emits
// system.file_rejected in the same transaction. A document no longer in
// state is not an error.
func (q *Queue) Reject(state, id, reason string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("reject %s: %w", q.kind, err)
	}
	err := q.update(func(tx store.Tx) error {
		if err := tx.Reject(q.kind, state, id, reason); err != nil {
			return err
		}
		if q.em == nil {
			return nil
		}
		return tx.Emit("system.file_rejected", q.em.Actor(),
			map[string]any{"path": q.kind + "/" + state + "/" + id, "reason": reason})
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
