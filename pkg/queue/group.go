package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Group runs fn's queue changes as one unit over the queues qs (a
// dispatch: the event to dispatched/, the task, its thread_start, the
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
// On a store (every queue of qs on the same one) fn runs inside one
// store.Update: all of it commits or none, and fn's error rolls it back.
// A step's ErrExists or fs.ErrNotExist leaves the transaction usable, so
// fn may tolerate it and go on.
//
// On files the steps happen in fn's order, as the same calls on the queues
// would: there the ORDER IS THE CRASH CONTRACT (a crash leaves the steps
// before it done), so fn keeps §9.2's order and the recovery that finishes
// a half-done dispatch stays the caller's. The writes are one group commit
// (Batch) made when fn returns: their temps are fsynced together, then
// renamed in order, a Remove between two writes runs between their
// renames once the earlier ones are durable, and the emits follow. A Move
// or FinishAs commits what is staged, then runs at once (fn sees its
// error). fn's error drops what is staged and not yet committed.
func Group(ctx context.Context, fn func(*GroupTx) error, qs ...*Queue) error {
	if len(qs) == 0 {
		return errors.New("queue group: no queues")
	}
	st := qs[0].st
	for _, q := range qs[1:] {
		if q.st != st {
			return fmt.Errorf("queue group: %s and %s are on different backends", qs[0].kind, q.kind)
		}
	}
	if st == nil {
		g := &GroupTx{files: &filesTx{b: NewBatch(), steps: map[int][]func() error{}}}
		if err := fn(g); err != nil {
			g.files.b.Abort()
			return err
		}
		return g.files.commit()
	}
	return st.Update(ctx, func(tx store.Tx) error { return fn(&GroupTx{st: st, tx: tx}) })
}

// GroupTx is one Group's view; its steps take the queue they change.
type GroupTx struct {
	st    store.Store // nil on files
	tx    store.Tx
	files *filesTx // on files
}

// filesTx is a files group's staged work.
type filesTx struct {
	b      *Batch
	staged []*Staged
	// steps[i] run before the i-th staged write's rename.
	steps map[int][]func() error
	emits []func() error
}

// commit renames the staged writes in order with the steps between them,
// then emits; it leaves the group empty for what fn stages next.
func (f *filesTx) commit() error {
	err := f.b.CommitSteps(f.steps)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range f.staged {
		if e := s.Err(); e != nil {
			errs = append(errs, e)
		}
	}
	emits := f.emits
	f.b, f.staged, f.steps, f.emits = NewBatch(), nil, map[int][]func() error{}, nil
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, emit := range emits {
		if err := emit(); err != nil {
			return err
		}
	}
	return nil
}

// on checks that q is on the group's backend.
func (g *GroupTx) on(q *Queue) error {
	if q.st != g.st {
		return fmt.Errorf("queue group: %s is not on the group's backend", q.kind)
	}
	return nil
}

// Put is Queue.Put within the group.
func (g *GroupTx) Put(q *Queue, state, id string, v any) error {
	if err := g.on(q); err != nil {
		return err
	}
	if g.files != nil {
		st, err := g.files.b.Replace(q, state, id, v)
		if err != nil {
			return err
		}
		g.files.staged = append(g.files.staged, st)
		return nil
	}
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return g.tx.Put(q.kind, state, id, b)
}

// PutOnce is Queue.PutOnce within the group (ErrExists).
func (g *GroupTx) PutOnce(q *Queue, state, id string, v any) error {
	if err := g.on(q); err != nil {
		return err
	}
	if g.files != nil {
		st, err := g.files.b.PutOnce(q, state, id, v)
		if err != nil {
			return err
		}
		if err := st.Err(); err != nil {
			return err
		}
		g.files.staged = append(g.files.staged, st)
		return nil
	}
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return g.tx.PutOnce(q.kind, state, id, b)
}

// Move is Queue.Move within the group (fs.ErrNotExist).
func (g *GroupTx) Move(q *Queue, from, to, id string) error {
	if err := g.on(q); err != nil {
		return err
	}
	if g.files != nil {
		if err := g.files.commit(); err != nil {
			return err
		}
		return q.Move(from, to, id)
	}
	return mapNotFound(g.tx.Move(q.kind, from, to, id))
}

// Remove is Queue.Remove within the group.
func (g *GroupTx) Remove(q *Queue, state, id string) error {
	if err := g.on(q); err != nil {
		return err
	}
	if g.files != nil {
		if err := ids.Check(id); err != nil {
			return fmt.Errorf("remove %s: %w", q.kind, err)
		}
		// A missing file is no error: nothing for fn to tolerate, so the
		// removal waits for its place among the renames.
		n := g.files.b.Len()
		g.files.steps[n] = append(g.files.steps[n], func() error { return q.Remove(state, id) })
		return nil
	}
	return g.tx.Remove(q.kind, state, id)
}

// FinishAs is Queue.FinishAs within the group (store.ErrFenced).
func (g *GroupTx) FinishAs(q *Queue, from, to, id string, c store.Claim) error {
	if err := g.on(q); err != nil {
		return err
	}
	if g.files != nil {
		if err := g.files.commit(); err != nil {
			return err
		}
		return q.FinishAs(from, to, id, c)
	}
	return mapNotFound(g.tx.Finish(q.kind, from, to, id, c))
}

// Then runs fn at this point of the group's order (a crash point between
// two steps): on files once the steps staged before it are done, on a
// store at once, inside the transaction.
func (g *GroupTx) Then(fn func()) {
	if g.files == nil {
		fn()
		return
	}
	n := g.files.b.Len()
	g.files.steps[n] = append(g.files.steps[n], func() error { fn(); return nil })
}

// Emit emits an internal event as em's actor: on files through em at once
// (em.Emit); on a store inside the transaction, so the event exists
// exactly when the changes do.
func (g *GroupTx) Emit(em *eventlog.Emitter, typ string, data any) error {
	if g.files != nil {
		g.files.emits = append(g.files.emits, func() error { return em.Emit(typ, data) })
		return nil
	}
	if em == nil {
		return nil
	}
	raw, err := em.Encode(typ, data)
	if err != nil {
		return err
	}
	return g.tx.Emit(typ, em.Actor(), raw)
}

// Fence makes a store group commit only while lease l is current
// (store.Tx.Fence); on files leadership is the role's flock and it does
// nothing.
func (g *GroupTx) Fence(l store.Lease) {
	if g.tx != nil && l != nil {
		g.tx.Fence(l)
	}
}
