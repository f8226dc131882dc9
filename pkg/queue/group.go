package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Group runs fn's queue changes as one transaction of the queues' store
// (a dispatch: the event to dispatched/, the task, its thread_start, the
// internal events, SPEC §9.2 and §11.7):
//
//	err := queue.Group(ctx, func(g *queue.GroupTx) error {
//		if err := g.Put(events, layout.Dispatched, ev.ID, data); err != nil { return err }
//		if err := g.Remove(events, layout.Pending, ev.ID); err != nil { return err }
//		if err := g.PutOnce(tasks, layout.Pending, t.ID, t); err != nil && !errors.Is(err, queue.ErrExists) { return err }
//		...
//		return g.Emit(em, "task.created", data)
//	}, events, tasks, msgs)
//
// Every queue of qs is on the same store; fn runs inside one store.Update:
// all of it commits or none, and fn's error rolls it back (the files
// store: its redo journal, so a crash leaves all of it or none). A step's
// ErrExists or fs.ErrNotExist leaves the transaction usable, so fn may
// tolerate it and go on.
func Group(ctx context.Context, fn func(*GroupTx) error, qs ...*Queue) error {
	if len(qs) == 0 {
		return errors.New("queue group: no queues")
	}
	st := qs[0].st
	for _, q := range qs[1:] {
		if q.st != st {
			return fmt.Errorf("queue group: %s and %s are on different stores", qs[0].kind, q.kind)
		}
	}
	return st.Update(ctx, func(tx store.Tx) error { return fn(&GroupTx{st: st, tx: tx}) })
}

// GroupTx is one Group's view; its steps take the queue they change.
type GroupTx struct {
	st store.Store
	tx store.Tx
}

// on checks that q is on the group's store.
func (g *GroupTx) on(q *Queue) error {
	if q.st != g.st {
		return fmt.Errorf("queue group: %s is not on the group's store", q.kind)
	}
	return nil
}

// Put is Queue.Put within the group.
func (g *GroupTx) Put(q *Queue, state, id string, v any) error {
	b, err := g.encode(q, state, id, v)
	if err != nil {
		return err
	}
	return g.tx.Put(q.kind, state, id, b)
}

// PutOnce is Queue.PutOnce within the group (ErrExists).
func (g *GroupTx) PutOnce(q *Queue, state, id string, v any) error {
	b, err := g.encode(q, state, id, v)
	if err != nil {
		return err
	}
	return g.tx.PutOnce(q.kind, state, id, b)
}

// encode checks a write of q and encodes v.
func (g *GroupTx) encode(q *Queue, state, id string, v any) ([]byte, error) {
	if err := g.on(q); err != nil {
		return nil, err
	}
	if err := q.checkPut(state, id); err != nil {
		return nil, err
	}
	b, err := encode(v)
	if err != nil {
		return nil, fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return b, nil
}

// Move is Queue.Move within the group (fs.ErrNotExist).
func (g *GroupTx) Move(q *Queue, from, to, id string) error {
	if err := g.on(q); err != nil {
		return err
	}
	return mapNotFound(g.tx.Move(q.kind, from, to, id))
}

// Remove is Queue.Remove within the group.
func (g *GroupTx) Remove(q *Queue, state, id string) error {
	if err := g.on(q); err != nil {
		return err
	}
	return g.tx.Remove(q.kind, state, id)
}

// FinishAs is Queue.FinishAs within the group (store.ErrFenced).
func (g *GroupTx) FinishAs(q *Queue, from, to, id string, c store.Claim) error {
	if err := g.on(q); err != nil {
		return err
	}
	return mapNotFound(g.tx.Finish(q.kind, from, to, id, c))
}

// Then runs fn at this point of the group's steps (a crash point between
// two steps), inside the transaction.
func (g *GroupTx) Then(fn func()) { fn() }

// Emit emits an internal event as em's actor inside the transaction, so
// the event exists exactly when the changes do. A nil em emits nothing.
func (g *GroupTx) Emit(em *eventlog.Emitter, typ string, data any) error {
	if em == nil {
		return nil
	}
	raw, err := em.Encode(typ, data)
	if err != nil {
		return err
	}
	return g.tx.Emit(typ, em.Actor(), raw)
}

// Fence makes the group commit only while lease l is current
// (store.Tx.Fence).
func (g *GroupTx) Fence(l store.Lease) {
	if l != nil {
		g.tx.Fence(l)
	}
}
