package king

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// fieldTarget is the extra field the king adds to a dispatched event: the
// general it chose, so a restart can rebuild a missing task exactly even
// when the choice came from a petition (event files allow extra fields).
const fieldTarget = "target_general"

// decodeEvent validates an event file and returns it with the king's
// target_general, when present.
func decodeEvent(data []byte) (*schema.Event, string, error) {
	ev, err := schema.DecodeEvent(data)
	if err != nil {
		return nil, "", err
	}
	var extra struct {
		Target string `json:"target_general"`
	}
	json.Unmarshal(data, &extra)
	return ev, extra.Target, nil
}

// decodeEntry is decodeEvent for a listed entry: one queue.List already
// validated (Checked) is only unmarshalled, as CheckDocument decoded the
// same bytes through the schema.
func decodeEntry(e queue.Entry) (*schema.Event, error) {
	if !e.Checked {
		ev, _, err := decodeEvent(e.Data)
		return ev, err
	}
	ev := new(schema.Event)
	if err := json.Unmarshal(e.Data, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// encodeDispatched renders ev with its target general.
func encodeDispatched(ev *schema.Event, general string) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	g, err := json.Marshal(general)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode event %s: not an object", ev.ID)
	}
	// The event's object plus one member (Event has its own MarshalJSON,
	// so a wrapping struct would lose the field).
	flat := append(b[:len(b)-1:len(b)-1], `,"`+fieldTarget+`":`...)
	flat = append(append(flat, g...), '}')
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// processPending handles pending events in priority, then age order
// (queue.List). The whole queue is listed and read every tick: a deferred
// event stays untouched in pending/ and is judged afresh next tick, so
// nothing about a past decision needs remembering.
func (k *King) processPending(adm *admission) error {
	entries, err := k.events.List(layout.Pending)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		ev, err := decodeEntry(e)
		if err != nil {
			k.events.Reject(layout.Pending, e.ID, "invalid event: "+err.Error())
			continue
		}
		if ev.ID != e.ID {
			k.events.Reject(layout.Pending, e.ID, fmt.Sprintf("id %q does not match the file name", ev.ID))
			continue
		}
		if k.events.Exists(layout.Dispatched, ev.ID) {
			// A king died between writing the dispatched copy and unlinking
			// this one (SPEC §9.2): the dispatched twin is the truth.
			if err := k.events.Remove(layout.Pending, ev.ID); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := k.handleEvent(ev, adm); err != nil {
			errs = append(errs, fmt.Errorf("event %s: %w", ev.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (k *King) handleEvent(ev *schema.Event, adm *admission) error {
	if reason := forgedReason(ev); reason != "" {
		return k.discard(ev, layout.Pending, reason)
	}
	switch {
	case ev.Type == TypeThreadReply:
		return k.handleReply(ev, adm)
	case k.petitionable(ev):
		if h := adm.holdFor(ev.Priority, ""); h != nil {
			k.deferred(ev, h)
			return nil
		}
		if err := k.startPetition(ev); err != nil {
			return err
		}
		adm.inFlight++
		return nil
	}
	g, ok := k.routes.Route(ev.Type)
	if !ok {
		return k.discard(ev, layout.Pending, "no general subscribes to "+ev.Type)
	}
	if h := adm.holdFor(ev.Priority, g); h != nil {
		k.deferred(ev, h)
		return nil
	}
	if err := k.dispatch(ev, g, layout.Pending); err != nil {
		return err
	}
	adm.inFlight++
	return nil
}

// deferred leaves an event in pending/ and notes why it waits (waits.go).
func (k *King) deferred(ev *schema.Event, h *hold) {
	k.waiting(ev.ID, "", h)
}

// discard moves an event that no general takes to completed/ and says why.
func (k *King) discard(ev *schema.Event, from, reason string) error {
	if err := k.events.Move(from, layout.Completed, ev.ID); err != nil {
		return err
	}
	k.markCompleted(ev.ID, reason)
	k.em.Emit("event.discarded", map[string]any{"event_id": ev.ID, "event_type": ev.Type, "reason": reason})
	k.log.Info("event discarded", "event", ev.ID, "type", ev.Type, "reason", reason)
	return nil
}

// dispatch turns ev into a task for general in the crash-safe order of SPEC
// §9.2: persist the task sequence → write the event carrying task_id into
// dispatched/ → unlink its copy in from/ → write the task → queue
// thread_start → emit. from is "" for schedules, whose event is born in
// dispatched/ (there the no-replace write is the dedupe, §9.22). The steps
// after the sequence are one queue.Group: one transaction fenced by the
// king's lease on a store (SPEC §11.7), today's ordered file steps on files.
func (k *King) dispatch(ev *schema.Event, general, from string) error {
	id, err := k.seq.next(k.now().In(k.loc), func(id string) bool { _, ok := k.tasks.Find(id); return ok })
	if err != nil {
		return err
	}
	ev.TaskID = id
	ev.Status = schema.EventDispatched
	data, err := encodeDispatched(ev, general)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	return k.group(func(g *queue.GroupTx) error {
		if from == "" {
			if err := g.PutOnce(k.events, layout.Dispatched, ev.ID, data); err != nil {
				return err
			}
		} else {
			if err := g.Put(k.events, layout.Dispatched, ev.ID, data); err != nil {
				return err
			}
			g.Then(func() { crashPoint(crashAfterEventDispatched) })
			if err := g.Remove(k.events, from, ev.ID); err != nil {
				return err
			}
		}
		return k.createTask(g, ev, general, false)
	})
}

// createTask writes the task of a dispatched event, its thread_start and the
// internal events, within g. It is also how a restart completes a dispatch
// that died before the task was written.
func (k *King) createTask(g *queue.GroupTx, ev *schema.Event, general string, recovered bool) error {
	t := k.buildTask(ev, general)
	if err := g.PutOnce(k.tasks, layout.Pending, t.ID, t); err != nil && !errors.Is(err, queue.ErrExists) {
		return fmt.Errorf("write task %s: %w", t.ID, err)
	}
	g.Then(func() { crashPoint(crashAfterTaskWrite) })
	if _, err := k.putMessageIn(g, threadStart(ev, t)); err != nil {
		return err
	}
	return k.taskCreated(g, ev, t, general, recovered)
}

// taskCreated emits (within g) and logs a created task.
func (k *King) taskCreated(g *queue.GroupTx, ev *schema.Event, t *schema.Task, general string, recovered bool) error {
	if err := g.Emit(k.em, "task.created", map[string]any{"task_id": t.ID, "event_type": ev.Type, "target_general": general, "priority": t.Priority}); err != nil {
		return err
	}
	if err := g.Emit(k.em, "event.dispatched", map[string]any{"event_id": ev.ID, "task_id": t.ID, "target_general": general}); err != nil {
		return err
	}
	if t.Type == schema.TaskTypeResume {
		if err := g.Emit(k.em, "task.resumed", map[string]any{"task_id": t.ID, "original_task_id": t.OriginalTaskID}); err != nil {
			return err
		}
	}
	k.log.Info("task created", "task", t.ID, "event", ev.ID, "general", general, "type", t.Type, "recovered", recovered)
	return nil
}

// buildTask derives the task of a dispatched event. It depends only on the
// event (and the resumed task's checkpoint), so a restart rebuilds it.
func (k *King) buildTask(ev *schema.Event, general string) *schema.Task {
	t := &schema.Task{
		ID:            ev.TaskID,
		EventID:       ev.ID,
		TargetGeneral: general,
		Type:          ev.Type,
		Repo:          ev.Repo,
		Payload:       maps.Clone(ev.Payload),
		Priority:      ev.Priority,
		CreatedAt:     schema.FormatTime(k.now()),
		Status:        schema.TaskPending,
	}
	if t.Payload == nil {
		t.Payload = map[string]any{}
	}
	if ev.Type == TypeThreadReply {
		if rc, reason := k.replyContext(ev); reason == "" {
			k.resumeFields(t, ev, rc)
		}
	}
	if schema.Deref(t.Repo) == "" {
		t.Repo = nil
		if m := k.routes.Manifest(general); m != nil && m.DefaultRepo != "" {
			t.Repo = schema.StringPtr(m.DefaultRepo)
		}
	}
	return t
}

// recover finishes dispatches a killed king left half done (SPEC §9.2): a
// dispatched event whose task_id is in no task directory gets exactly that
// task; one whose task already completed follows it to completed/; the
// others get their thread_start if it is missing.
func (k *King) recover() error {
	entries, err := k.events.List(layout.Dispatched)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		ev, target, err := decodeEvent(e.Data)
		if err != nil {
			k.events.Reject(layout.Dispatched, e.ID, "invalid event: "+err.Error())
			continue
		}
		if ev.TaskID == "" {
			k.log.Warn("dispatched event without task_id left alone", "event", ev.ID)
			continue
		}
		if target == "" {
			target, _ = k.routes.Route(ev.Type)
		}
		st, ok := k.tasks.Find(ev.TaskID)
		switch {
		case !ok:
			if target == "" {
				errs = append(errs, k.discard(ev, layout.Dispatched, "no general for a dispatched event without its task"))
				continue
			}
			if err := k.group(func(g *queue.GroupTx) error { return k.createTask(g, ev, target, true) }); err != nil {
				errs = append(errs, err)
			}
		case st == layout.Completed || st == layout.Rejected:
			if err := k.events.Move(layout.Dispatched, layout.Completed, ev.ID); err != nil {
				errs = append(errs, err)
			} else {
				k.markCompleted(ev.ID, "")
			}
		default:
			var t schema.Task
			if err := k.tasks.ReadJSON(st, ev.TaskID, &t); err != nil {
				continue // moved meanwhile: nothing to repair
			}
			if _, err := k.putMessage(threadStart(ev, &t)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
