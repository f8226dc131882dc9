package king

import (
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Group-committed dispatch (issue #15.2). While processPending walks the
// pending events, dispatch only records each admitted event; the tick then
// dispatches them all in SPEC §9.2's crash-safe order, with one sync for
// the whole batch instead of four fsync'd writes per event:
//
//	reserve the task ids (one task-seq write for the whole batch)
//	→ stage every dispatched copy, task and thread_start (invisible temps)
//	→ make them all durable (one sync) → rename the dispatched copies
//	(directory synced) → unlink the pending copies → rename the tasks
//	(directory synced) → rename the messages (directory synced) → emit.
//
// A crash anywhere leaves exactly the states a crash in a single dispatch
// can leave, per event, and recover() repairs them the same way.

// CrashInDispatchBatch is the crash point inside a batch: after the first
// dispatched copy is renamed into place, before the others.
const CrashInDispatchBatch = "in-dispatch-batch"

// maxDispatchBatch bounds one group commit (memory, open temps: a batch
// stages its dispatched copies, tasks and messages together, so up to
// three times this many files are open at once).
const maxDispatchBatch = 256

type dispatchIntent struct {
	ev      *schema.Event
	general string
	task    *schema.Task
}

// queueDispatch records an admitted pending event for the tick's batch.
// It reports false when batching is off (dispatch then runs at once).
func (k *King) queueDispatch(ev *schema.Event, general, from string) bool {
	if !k.batching || from != layout.Pending {
		return false
	}
	k.intents = append(k.intents, dispatchIntent{ev: ev, general: general})
	return true
}

// flushDispatches dispatches every recorded event, in chunks.
func (k *King) flushDispatches() error {
	all := k.intents
	k.intents = nil
	var errs []error
	for len(all) > 0 {
		n := min(len(all), maxDispatchBatch)
		if err := k.dispatchBatch(all[:n]); err != nil {
			errs = append(errs, err)
		}
		all = all[n:]
	}
	return errors.Join(errs...)
}

func (k *King) dispatchBatch(batch []dispatchIntent) error {
	ids, err := k.seq.nextN(k.now().In(k.loc), len(batch), func(id string) bool { _, ok := k.tasks.Find(id); return ok })
	if err != nil {
		return err
	}
	var errs []error
	// Every file of the batch is staged first and made durable in one sync
	// (queue.SyncBatches); the renames then follow in §9.2's order, each
	// step's directory synced before the next step starts. A staged file
	// is invisible (a temp of the king's spare pool) until its rename, so a
	// crash anywhere leaves the states of a crash between the steps.
	//
	// 1. The dispatched copies, carrying task_id and the chosen general.
	b := queue.NewBatch()
	b.AfterRename(func(i int) {
		if i == 0 {
			k.crash(CrashInDispatchBatch)
		}
	})
	staged := batch[:0:0]
	for i, d := range batch {
		d.ev.TaskID = ids[i]
		d.ev.Status = schema.EventDispatched
		data, err := encodeDispatched(d.ev, d.general)
		if err == nil {
			err = b.Put(k.events, layout.Dispatched, d.ev.ID, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("event %s: %w", d.ev.ID, err))
			continue
		}
		staged = append(staged, d)
	}
	// 3. The tasks (the id was just reserved: nextN checked it is in no
	// state, only the no-replace rename checks again).
	tb := queue.NewBatch()
	puts := make([]*queue.Staged, len(staged))
	for i := range staged {
		d := &staged[i]
		d.task = k.buildTask(d.ev, d.general)
		s, err := tb.Create(k.tasks, layout.Pending, d.task.ID, d.task)
		if err != nil {
			errs = append(errs, fmt.Errorf("write task %s: %w", d.task.ID, err))
			continue
		}
		puts[i] = s
	}
	// 4. Their thread_start messages (a new task's first message: only
	// the no-replace rename checks).
	mb := queue.NewBatch()
	msgs := make([]*queue.Staged, len(staged))
	for i, d := range staged {
		if puts[i] == nil {
			continue
		}
		m := threadStart(d.ev, d.task)
		k.fillMessage(m)
		s, err := mb.Create(k.msgs, layout.Pending, m.ID, m)
		if err != nil {
			errs = append(errs, fmt.Errorf("queue message %s: %w", m.ID, err))
			continue
		}
		msgs[i] = s
	}
	if err := queue.SyncBatches(b, tb, mb); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := b.Commit(); err != nil {
		// Some copies may be in place: recover() finishes them.
		tb.Abort()
		mb.Abort()
		return errors.Join(append(errs, err)...)
	}
	k.crash(CrashAfterEventDispatched)
	// 2. The inputs are done: unlink the pending copies.
	for _, d := range staged {
		if err := k.events.Remove(layout.Pending, d.ev.ID); err != nil {
			errs = append(errs, err)
		}
	}
	for i, d := range staged {
		if puts[i] != nil {
			k.noteGeneral(d.task.ID, d.general)
		}
	}
	if err := tb.Commit(); err != nil {
		mb.Abort()
		return errors.Join(append(errs, err)...)
	}
	for _, s := range puts {
		if s != nil && s.Err() != nil && !errors.Is(s.Err(), queue.ErrExists) {
			errs = append(errs, s.Err())
		}
	}
	k.crash(CrashAfterTaskWrite)
	if err := mb.Commit(); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i, d := range staged {
		if msgs[i] == nil {
			continue
		}
		if err := msgs[i].Err(); err != nil && !errors.Is(err, queue.ErrExists) {
			errs = append(errs, err)
			continue
		}
		k.taskCreated(d.ev, d.task, d.general, false)
	}
	return errors.Join(errs...)
}
