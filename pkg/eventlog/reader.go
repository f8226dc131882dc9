package eventlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Reader reads the internal event stream from a saved place, at least once:
// Poll calls fn for each event after the place (fn's error stops it, the
// place then stays before that event) and Save persists the place after
// the caller handled what Poll gave. A Cursor reads logs/events.log; a
// StoreReader reads a store's event log. A consumer switches with its
// constructor alone.
type Reader interface {
	Poll(fn func(Event) error) (int, error)
	Save() error
	Close() error
}

var (
	_ Reader = (*Cursor)(nil)
	_ Reader = (*StoreReader)(nil)
)

// NSCursors is the store key-value namespace of saved reader places.
const NSCursors = "cursors"

// StoreReader reads st.Events from the store cursor saved under its name
// in the store's key-value (NSCursors), so a consumer that moves to
// another host (a failed-over leader) resumes where it stopped. A
// consumer that runs on every host puts the host in its name. The store
// delivers a late-committing event after the ones before it, never skips
// it (SPEC §11.7).
type StoreReader struct {
	st   store.Store
	name string
	cur  store.Cursor
	// Batch is how many events one store read returns (default 500).
	Batch int
}

// OpenStoreReader returns the reader called name (a safe id), at its
// saved cursor or at the beginning of the log.
func OpenStoreReader(st store.Store, name string) (*StoreReader, error) {
	if err := store.CheckKey(NSCursors, name); err != nil {
		return nil, fmt.Errorf("open event reader: %w", err)
	}
	r := &StoreReader{st: st, name: name, Batch: 500}
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	b, err := st.Value(ctx, NSCursors, name)
	switch {
	case err == nil:
		r.cur = store.Cursor(b)
	case errors.Is(err, store.ErrNotFound):
	default:
		return nil, fmt.Errorf("open event reader %s: %w", name, err)
	}
	return r, nil
}

// Cursor returns the place just past the last event Poll delivered.
func (r *StoreReader) Cursor() store.Cursor { return r.cur }

// Seek moves the reader to c (e.g. an SSE Last-Event-ID).
func (r *StoreReader) Seek(c store.Cursor) { r.cur = c }

// Poll delivers every event after the cursor, oldest first, in batches of
// Batch.
func (r *StoreReader) Poll(fn func(Event) error) (int, error) {
	batch := r.Batch
	if batch <= 0 {
		batch = 500
	}
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
		evs, err := r.st.Events(ctx, r.cur, batch)
		cancel()
		if err != nil {
			return n, fmt.Errorf("read event log: %w", err)
		}
		for _, ev := range evs {
			if err := fn(Event{TS: ev.TS, Type: ev.Type, Actor: ev.Actor, Data: ev.Data}); err != nil {
				return n, err
			}
			r.cur = ev.Cursor
			n++
		}
		if len(evs) < batch {
			return n, nil
		}
	}
}

// Save stores the cursor under the reader's name.
func (r *StoreReader) Save() error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	err := r.st.Update(ctx, func(tx store.Tx) error { return tx.Set(NSCursors, r.name, []byte(r.cur)) })
	if err != nil {
		return fmt.Errorf("save event reader %s: %w", r.name, err)
	}
	return nil
}

// Close does nothing: the reader holds no connection of its own.
func (r *StoreReader) Close() error { return nil }
