package queue

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// StoreTimeout bounds each store call a Queue makes: the methods take no
// context, and a role must not hang on a database it cannot reach.
const StoreTimeout = 30 * time.Second

// OnStore returns the queue of kind kept in st. host names this host in
// the claims it makes (Claim; ClaimAs names its own holder). em receives
// system.file_rejected events; it may be nil. l is kept for Dir and Path
// only: nothing of the queue is written under it.
//
// Differences from file mode, all forced by there being no files:
// Entry.Path is ""; Dir and Path name where the files would be;
// SweepTemps returns 0; RejectFile takes only "<id>.json"; Batch refuses
// the queue (use Group). Poison that is not JSON never gets into a store;
// List and Count still check each document against its kind's schema and
// reject a failing one, with system.file_rejected in the same transaction.
func OnStore(st store.Store, l layout.Layout, kind string, em *eventlog.Emitter, host string) *Queue {
	q := &Queue{l: l, kind: kind, states: layout.QueueStates[kind], em: em, MaxSize: DefaultMaxSize, st: st, host: host}
	q.b = onStore{q}
	return q
}

// onStore is the store backend.
type onStore struct{ *Queue }

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), StoreTimeout)
}

// notExist marks a store's ErrNotFound as fs.ErrNotExist too, the error
// file-mode callers of Move and Read already test for.
type notExist struct{ error }

func (e notExist) Is(target error) bool { return target == fs.ErrNotExist }
func (e notExist) Unwrap() error        { return e.error }

func mapNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notExist{err}
	}
	return err
}

func (q onStore) update(fn func(store.Tx) error) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Update(ctx, fn)
}

func (q onStore) put(state, id string, b []byte) error {
	return q.update(func(tx store.Tx) error { return tx.Put(q.kind, state, id, b) })
}

func (q onStore) putOnce(state, id string, v any) error {
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return q.update(func(tx store.Tx) error { return tx.PutOnce(q.kind, state, id, b) })
}

func (q onStore) get(id string) (store.Doc, error) {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Get(ctx, q.kind, id)
}

func (q onStore) find(id string) (string, bool) {
	d, err := q.get(id)
	if err != nil {
		return "", false
	}
	return d.State, true
}

func (q onStore) exists(state, id string) bool {
	s, ok := q.find(id)
	return ok && s == state
}

func (q onStore) claim(from, to, id string, c store.Claim) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return q.st.Claim(ctx, q.kind, from, to, id, c)
}

func (q onStore) finish(from, to, id string, c store.Claim) error {
	return mapNotFound(q.update(func(tx store.Tx) error { return tx.Finish(q.kind, from, to, id, c) }))
}

func (q onStore) move(from, to, id string) error {
	return mapNotFound(q.update(func(tx store.Tx) error { return tx.Move(q.kind, from, to, id) }))
}

func (q onStore) remove(state, id string) error {
	return q.update(func(tx store.Tx) error { return tx.Remove(q.kind, state, id) })
}

func (q onStore) read(state, id string) ([]byte, error) {
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

// list returns the store's order (the same rule as SortEntries), checking
// every document outside rejected/ as file mode does.
func (q onStore) list(state string) ([]Entry, error) {
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
				q.reject(state, d.ID, reason)
				continue
			}
		}
		out = append(out, Entry{ID: d.ID, State: state, Priority: d.Priority, CreatedAt: d.CreatedAt,
			Data: d.Data, Checked: state != layout.Rejected})
	}
	return out, nil
}

// poison returns why no consumer could take d, or "".
func (q onStore) poison(d store.Doc) string {
	if int64(len(d.Data)) > q.MaxSize {
		return atomicfile.ErrTooLarge.Error()
	}
	if err := q.CheckDocument(d.ID, d.Data); err != nil {
		return err.Error()
	}
	return ""
}

func (q onStore) ids(state string) ([]string, error) {
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

func (q onStore) count(state string) int {
	if q.checkState(state) != nil {
		return 0
	}
	es, err := q.list(state)
	if err != nil {
		return 0
	}
	return len(es)
}

// reject moves id to rejected with its reason and emits
// system.file_rejected in the same transaction. A document no longer in
// state is not an error (file mode: the file vanished).
func (q onStore) reject(state, id, reason string) error {
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

func (q onStore) rejectFile(state, name, reason string) error {
	id, ok := strings.CutSuffix(name, ".json")
	if !ok || !ids.Valid(id) {
		return fmt.Errorf("reject %s: %q names no document of a store", q.kind, name)
	}
	return q.reject(state, id, reason)
}

func (q onStore) sweepTemps(time.Duration, time.Time) int { return 0 }
