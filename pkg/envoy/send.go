package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// A message is sent alone, start to end, in this order (deliveries.go):
//
//  1. write its record "posting" in the store (a record that cannot be
//     written holds the sends: diskhold.go);
//  2. post it to Slack (or the console);
//  3. write its record "recorded" (msg id → channel, ts); apply its
//     bookkeeping in memory;
//  4. add its reactions;
//  5. in one store transaction, write the message, its status set, into
//     sent/ (or failed/) and remove the pending/ copy; emit message.sent
//     (or message.failed).
//
// A crash between 1 and 3 leaves a post in doubt: the next leader looks
// for it before any repost. After 3, it finishes the message without
// posting it again. After 5, the message is done: a pending/ copy whose id
// is already in sent/ or failed/ (a store finishing a transaction a crash
// cut) is removed unsent.

// sendPending sends every message in pending/, oldest first. The envoy is
// the single consumer of the messages queue (its lease makes it so).
func (e *Envoy) sendPending(ctx context.Context) error {
	e.mu.Lock()
	hold := e.holdUntil
	e.mu.Unlock()
	if e.clock.Now().Before(hold) {
		return nil // Slack's Retry-After has not passed yet
	}
	entries, err := e.messages.List(layout.Pending)
	if err != nil || len(entries) == 0 {
		return err
	}
	if cp, ok := e.poster.(*consolePoster); ok {
		cp.begin()
		defer cp.end()
	}
	var errs []error
	for _, ent := range entries {
		if ctx.Err() != nil {
			break
		}
		err := e.deliver(ctx, ent)
		if errors.Is(err, errHeld) {
			e.log.Warn("slack rate limit: sends held", "err", err)
			break
		}
		if errors.Is(err, errDiskHeld) {
			break
		}
		if errors.Is(err, store.ErrFenced) {
			return err // deposed: the next leader sends the rest
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// outcome is how a message ends: in sent/ or failed/, with the fields
// set in its file (a nil value removes the field).
type outcome struct {
	state  string // layout.Sent or layout.Failed
	d      Delivery
	errMsg string // failed: why
	extra  map[string]any
}

// finish writes the message, its status and extra fields set, into its
// final state (durably: a message in sent/ is never posted again), then
// removes the pending/ copy and emits the event. The directory is the
// truth; the status field only helps someone reading the file with cat.
func (e *Envoy) finish(ctx context.Context, ent queue.Entry, m *doc.Message, o outcome) error {
	data, err := statusDoc(ent.Data, o.state, o.extra)
	if err != nil {
		return fmt.Errorf("finish message %s: %w", ent.ID, err)
	}
	// One transaction, fenced by the lease.
	ctx, cancel := context.WithTimeout(ctx, e.st.timeout)
	defer cancel()
	err = queue.Group(ctx, func(g *queue.GroupTx) error {
		g.Fence(e.currentLease())
		if err := g.Put(e.messages, o.state, ent.ID, data); err != nil {
			return err
		}
		e.step("finished", ent.ID)
		return g.Remove(e.messages, layout.Pending, ent.ID)
	}, e.messages)
	if err != nil {
		return fmt.Errorf("finish message %s: %w", ent.ID, err)
	}
	e.st.finished(ent.ID, o.state == layout.Sent)
	if o.state == layout.Sent {
		e.em.Emit("message.sent", map[string]any{"msg_id": m.ID, "task_id": m.TaskID, "channel": o.d.Channel})
		e.log.Info("message sent", "msg_id", m.ID, "type", m.Type, "channel", o.d.Channel)
		return nil
	}
	e.em.Emit("message.failed", map[string]any{"msg_id": m.ID, "task_id": m.TaskID, "error": o.errMsg})
	e.log.Error("message failed", "msg_id", m.ID, "type", m.Type, "err", o.errMsg)
	return nil
}

// finishedBefore removes the pending/ copy of a message already in sent/
// or failed/ (a crash fell between its final write and the removal) and
// reports whether it did.
func (e *Envoy) finishedBefore(id string) (bool, error) {
	if !e.messages.Exists(layout.Sent, id) && !e.messages.Exists(layout.Failed, id) {
		return false, nil
	}
	if err := e.messages.Remove(layout.Pending, id); err != nil {
		return true, err
	}
	e.st.finished(id, false)
	e.log.Info("leftover pending copy of a finished message removed", "msg_id", id)
	return true, nil
}

// step runs the envoy's test hook at a named point of a send.
func (e *Envoy) step(name, id string) {
	if e.afterStep != nil {
		e.afterStep(name, id)
	}
}

// statusDoc returns data (a message file) with its status and the extra
// fields set (a nil value removes the field), indented as the queue writes
// files. Raw values: every other field is kept byte for byte (numbers
// too), and nothing below the top level is parsed.
func statusDoc(data []byte, state string, extra map[string]any) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return nil, errors.New("not a JSON object")
	}
	var err error
	if doc["status"], err = json.Marshal(state); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if v == nil {
			delete(doc, k)
			continue
		}
		if doc[k], err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
