package king

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Group-committed results (issue #15.2). While processResults acts on the
// tick's final results, the messages of the results that complete a task
// (✅/❌/⏭️, proclamation, question) are staged and each completion only
// recorded; the tick then finishes them all in complete's crash-safe
// order, one group commit per step instead of a durable write each:
//
//	messages (one commit) → events to completed/ → their status and the
//	tasks' final status (one commit) → tasks to completed/ (the completing
//	renames, last) → emit.
//
// A crash anywhere leaves, per task, a state a crash inside complete can
// leave, and the next tick finishes it the same way (message ids are
// deterministic, a task still in in_progress/ is redone).

// CrashInResultBatch is the crash point inside a results batch: after the
// first message is renamed into place, before the others.
const CrashInResultBatch = "in-result-batch"

type resultBatch struct {
	msgs    *queue.Batch
	pending []*queue.Staged // messages of the result being finished
	done    []*completion
}

type completion struct {
	t              *schema.Task
	status, evType string
	data           map[string]any
	msgs           []*queue.Staged
	moved          bool          // its event reached completed/ in this batch
	mark           *queue.Staged // the event's status rewrite
	put            *queue.Staged // the task's final status
}

// startResultBatch makes complete and queueMessage record instead of
// write, until flushResults.
func (k *King) startResultBatch() {
	b := queue.NewBatch()
	b.AfterRename(func(i int) {
		if i == 0 {
			k.crash(CrashInResultBatch)
		}
	})
	k.rb = &resultBatch{msgs: b}
}

// queueMessage queues a message that precedes a completion: staged in the
// tick's batch, or written at once outside one.
func (k *King) queueMessage(m *schema.Message) error {
	if k.rb == nil {
		_, err := k.putMessage(m)
		return err
	}
	k.fillMessage(m)
	s, err := k.rb.msgs.PutOnce(k.msgs, layout.Pending, m.ID, m)
	if err != nil {
		return fmt.Errorf("queue message %s: %w", m.ID, err)
	}
	k.rb.pending = append(k.rb.pending, s)
	return nil
}

// deferCompletion records a completion for flushResults; false outside a
// batch.
func (k *King) deferCompletion(t *schema.Task, status, evType string, data map[string]any) bool {
	if k.rb == nil {
		return false
	}
	k.rb.done = append(k.rb.done, &completion{t: t, status: status, evType: evType, data: data, msgs: k.rb.pending})
	k.rb.pending = nil
	return true
}

// flushResults commits a batch: see resultBatch.
func (k *King) flushResults(rb *resultBatch) error {
	if rb == nil || (rb.msgs.Len() == 0 && len(rb.done) == 0) {
		return nil
	}
	if err := rb.msgs.Commit(); err != nil {
		// Nothing is marked done: the next tick redoes every completion.
		return err
	}
	if len(rb.done) == 0 {
		return nil
	}
	k.crash(CrashAfterCompletionMessage)
	var errs []error
	ready := make([]*completion, 0, len(rb.done))
	for _, c := range rb.done {
		failed := false
		for _, s := range c.msgs {
			if err := s.Err(); err != nil && !errors.Is(err, queue.ErrExists) {
				errs = append(errs, fmt.Errorf("task %s: %w", c.t.ID, err))
				failed = true
			}
		}
		if failed {
			continue
		}
		err := k.events.Move(layout.Dispatched, layout.Completed, c.t.EventID)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("task %s: %w", c.t.ID, err))
			continue
		}
		c.moved = err == nil
		ready = append(ready, c)
	}
	b := queue.NewBatch()
	for _, c := range ready {
		if c.moved {
			c.mark = k.stageMarkCompleted(b, c.t.EventID)
		}
		c.t.Status = c.status
		s, err := b.Replace(k.tasks, layout.InProgress, c.t.ID, c.t)
		if err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", c.t.ID, err))
			continue
		}
		c.put = s
	}
	if err := b.Commit(); err != nil {
		errs = append(errs, err)
	}
	for _, c := range ready {
		if c.mark != nil && c.mark.Err() != nil {
			k.log.Warn("mark event completed", "event", c.t.EventID, "err", c.mark.Err())
		}
		if c.put == nil || c.put.Err() != nil {
			continue // its error is in errs; the next tick redoes it
		}
		if err := k.tasks.Move(layout.InProgress, layout.Completed, c.t.ID); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", c.t.ID, err))
			continue
		}
		k.completed(c.t, c.status, c.evType, c.data)
	}
	return errors.Join(errs...)
}

// stageMarkCompleted is markCompleted into a batch (best effort: nil when
// the event cannot be read).
func (k *King) stageMarkCompleted(b *queue.Batch, id string) *queue.Staged {
	doc := k.completedDoc(id, "")
	if doc == nil {
		return nil
	}
	s, err := b.Replace(k.events, layout.Completed, id, doc)
	if err != nil {
		k.log.Warn("mark event completed", "event", id, "err", err)
		return nil
	}
	return s
}
