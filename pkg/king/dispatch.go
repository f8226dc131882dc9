package king

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/kingdom-dev/kingdom/pkg/doc"
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
func decodeEvent(data []byte) (*doc.Event, string, error) {
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
func decodeEntry(e queue.Entry) (*doc.Event, error) {
	if !e.Checked {
		ev, _, err := decodeEvent(e.Data)
		return ev, err
	}
	ev := new(doc.Event)
	if err := json.Unmarshal(e.Data, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// encodeDispatched renders ev with its target general.
func encodeDispatched(ev *doc.Event, general string) ([]byte, error) {
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
// nothing about a past decision needs remembering. The events admitted for
// a general are dispatched together at the end (dispatchAll): one group
// commit for the tick, however many slots a tick's results freed.
func (k *King) processPending(adm *admission) error {
	entries, err := k.events.List(layout.Pending)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	// The dispatched ids, listed once for the twin check below (one
	// directory read, or one query on a store, not one per event).
	ids, err := k.events.IDs(layout.Dispatched)
	if err != nil {
		return err
	}
	dispatched := make(map[string]bool, len(ids))
	for _, id := range ids {
		dispatched[id] = true
	}
	var errs []error
	var admitted []routed
	for _, e := range entries {
		ev, err := decodeEntry(e)
		if err != nil {
			k.reject(k.events, layout.Pending, e.ID, "invalid event: "+err.Error())
			continue
		}
		if ev.ID != e.ID {
			k.reject(k.events, layout.Pending, e.ID, fmt.Sprintf("id %q does not match the file name", ev.ID))
			continue
		}
		if dispatched[ev.ID] {
			// A king died between writing the dispatched copy and unlinking
			// this one (SPEC §9.2): the dispatched twin is the truth.
			if err := k.events.Remove(layout.Pending, ev.ID); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		r, err := k.handleEvent(ev, adm)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %s: %w", ev.ID, err))
		} else if r.ev != nil {
			admitted = append(admitted, r)
		}
	}
	if err := k.dispatchAll(admitted, layout.Pending); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// routed is an event admitted for general, to be dispatched.
type routed struct {
	ev      *doc.Event
	general string
}

// handleEvent decides what becomes of a pending event. An event admitted
// for a general is returned for the tick's dispatchAll (and counted in
// flight at once); the rest (discards, petitions, replies) happen here.
func (k *King) handleEvent(ev *doc.Event, adm *admission) (routed, error) {
	if reason := forgedReason(ev); reason != "" {
		return routed{}, k.discard(ev, layout.Pending, reason)
	}
	switch {
	case ev.Type == TypeThreadReply:
		return routed{}, k.handleReply(ev, adm)
	case k.petitionable(ev):
		if h := adm.holdFor(ev.Priority, ""); h != nil {
			k.waiting(ev.ID, "", h) // it stays in pending/ (waits.go)
			return routed{}, nil
		}
		if err := k.startPetition(ev); err != nil {
			return routed{}, err
		}
		adm.inFlight++
		return routed{}, nil
	}
	g, ok := k.routes.Route(ev.Type)
	if !ok {
		return routed{}, k.discard(ev, layout.Pending, "no general subscribes to "+ev.Type)
	}
	if h := adm.holdFor(ev.Priority, g); h != nil {
		k.waiting(ev.ID, "", h) // it stays in pending/ (waits.go)
		return routed{}, nil
	}
	adm.inFlight++
	return routed{ev: ev, general: g}, nil
}

// discard moves an event that no general takes to completed/ and says why.
func (k *King) discard(ev *doc.Event, from, reason string) error {
	if err := k.completeEvent(from, ev.ID, reason); err != nil {
		return err
	}
	k.em.Emit("event.discarded", map[string]any{"event_id": ev.ID, "event_type": ev.Type, "reason": reason})
	k.log.Info("event discarded", "event", ev.ID, "type", ev.Type, "reason", reason)
	return nil
}

// dispatchAll turns each event into a task for its general in the
// crash-safe order of SPEC §9.2, all events step by step together: persist
// the task sequence (one update for all) → write every event carrying its
// task_id into dispatched/ → unlink their copies in from/ → write the tasks
// → queue their thread_starts → emit. from is "" for schedules, whose event
// is born in dispatched/ (there the no-replace write is the dedupe, §9.22).
// The steps after the sequence are one queue.Group: one transaction fenced
// by the king's lease on a store (SPEC §11.7); on files one group commit, so
// a crash leaves every event at the same step, which recover finishes.
func (k *King) dispatchAll(rs []routed, from string) error {
	// The breaker first: an event of a parked item is not dispatched
	// (breaker.go).
	rs, gateErr := k.itemGate(rs, from)
	if len(rs) == 0 {
		return gateErr
	}
	if err := k.dispatchGroup(rs, from); err != nil {
		return errors.Join(gateErr, err)
	}
	for _, r := range rs {
		k.countAttempt(r.ev.Source, &doc.Task{ID: r.ev.TaskID, Repo: r.ev.Repo, Payload: r.ev.Payload})
	}
	return gateErr
}

// dispatchGroup is dispatchAll's dispatch itself.
func (k *King) dispatchGroup(rs []routed, from string) error {
	ids, err := k.seq.next(k.ctx(), k.now().In(k.loc), len(rs), func(id string) bool { _, ok := k.tasks.Find(id); return ok })
	if err != nil {
		return err
	}
	data := make([][]byte, len(rs))
	for i, r := range rs {
		r.ev.TaskID = ids[i]
		r.ev.Status = doc.EventDispatched
		if data[i], err = encodeDispatched(r.ev, r.general); err != nil {
			return fmt.Errorf("encode event %s: %w", r.ev.ID, err)
		}
	}
	if err := k.recordCanaries(rs, ids); err != nil {
		return err
	}
	return k.group(func(g *queue.GroupTx) error {
		for i, r := range rs {
			put := g.Put
			if from == "" {
				put = g.PutOnce
			}
			if err := put(k.events, layout.Dispatched, r.ev.ID, data[i]); err != nil {
				return err
			}
		}
		if from != "" {
			k.crashHook(g, crashAfterEventDispatched)
			for _, r := range rs {
				if err := g.Remove(k.events, from, r.ev.ID); err != nil {
					return err
				}
			}
		}
		ts := make([]*doc.Task, len(rs))
		for i, r := range rs {
			if ts[i], err = k.putTask(g, r.ev, r.general); err != nil {
				return err
			}
		}
		k.crashHook(g, crashAfterTaskWrite)
		for i, r := range rs {
			if err := k.announceTask(g, r.ev, ts[i], r.general, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// createTask writes the task of a dispatched event, its thread_start and the
// internal events, within g. It is also how a restart completes a dispatch
// that died before the task was written.
func (k *King) createTask(g *queue.GroupTx, ev *doc.Event, general string, recovered bool) error {
	t, err := k.putTask(g, ev, general)
	if err != nil {
		return err
	}
	k.crashHook(g, crashAfterTaskWrite)
	return k.announceTask(g, ev, t, general, recovered)
}

// putTask writes the task of a dispatched event within g (a task already
// written is no error).
func (k *King) putTask(g *queue.GroupTx, ev *doc.Event, general string) (*doc.Task, error) {
	t := k.buildTask(ev, general)
	if err := g.PutOnce(k.tasks, layout.Pending, t.ID, t); err != nil && !errors.Is(err, queue.ErrExists) {
		return nil, fmt.Errorf("write task %s: %w", t.ID, err)
	}
	return t, nil
}

// announceTask queues a written task's thread_start and emits its events,
// within g, and logs the created task.
func (k *King) announceTask(g *queue.GroupTx, ev *doc.Event, t *doc.Task, general string, recovered bool) error {
	if _, err := k.putMessageIn(g, threadStart(ev, t)); err != nil {
		return err
	}
	if err := g.Emit(k.em, "task.created", map[string]any{"task_id": t.ID, "event_type": ev.Type, "target_general": general, "priority": t.Priority}); err != nil {
		return err
	}
	if err := g.Emit(k.em, "event.dispatched", map[string]any{"event_id": ev.ID, "task_id": t.ID, "target_general": general}); err != nil {
		return err
	}
	if t.Type == doc.TaskTypeResume {
		if err := g.Emit(k.em, "task.resumed", map[string]any{"task_id": t.ID, "original_task_id": t.OriginalTaskID}); err != nil {
			return err
		}
	}
	k.log.Info("task created", "task", t.ID, "event", ev.ID, "general", general, "type", t.Type, "recovered", recovered)
	return nil
}

// buildTask derives the task of a dispatched event. It depends only on the
// event (and the resumed task's checkpoint), so a restart rebuilds it.
func (k *King) buildTask(ev *doc.Event, general string) *doc.Task {
	t := &doc.Task{
		ID:            ev.TaskID,
		EventID:       ev.ID,
		TargetGeneral: general,
		Type:          ev.Type,
		Repo:          ev.Repo,
		Payload:       maps.Clone(ev.Payload),
		Priority:      ev.Priority,
		CreatedAt:     doc.FormatTime(k.now()),
		Status:        doc.TaskPending,
	}
	if t.Payload == nil {
		t.Payload = map[string]any{}
	}
	if ev.Type == TypeThreadReply {
		if rc, reason := k.replyContext(ev); reason == "" {
			k.resumeFields(t, ev, rc)
		}
	}
	if doc.Deref(t.Repo) == "" {
		t.Repo = nil
		if m := k.routes.Manifest(general); m != nil && m.DefaultRepo != "" {
			t.Repo = doc.StringPtr(m.DefaultRepo)
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
			k.reject(k.events, layout.Dispatched, e.ID, "invalid event: "+err.Error())
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
			if err := k.completeEvent(layout.Dispatched, ev.ID, ""); err != nil {
				errs = append(errs, err)
			}
		default:
			var t doc.Task
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
