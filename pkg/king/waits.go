package king

import (
	"fmt"
	"slices"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Why work waits (pkg/waits): every tick the king names, for each pending
// event it did not dispatch and each pending task no general may claim yet,
// the one reason that holds it. The record (kv.NSWaits in the store:
// state/king/waits.json on files) is rewritten only when it
// changed; the operator hears of a wait (an Info line and an event.waiting /
// task.waiting event) once per change of its reason, never once per tick.

// hold is one reason work waits.
type hold struct {
	reason string // a waits reason
	detail string // one sentence with the figure that holds it
	// level is what else must change for the operator to hear of the wait
	// again: a health level, an engine. The detail's figures (memory 91 %,
	// then 92 %) change the record, not the log.
	level string
	until time.Time // when it lifts by itself; zero: unknown
}

// waitBook is the king's memory of what waits.
type waitBook struct {
	loaded bool
	rec    waits.Record      // as last written
	told   map[string]string // id → reason and level last announced
	cur    []waits.Wait      // this tick's, in the order found
	levels map[string]string // id → this tick's hold level
}

// maxWaitsListed bounds the record: about 300 bytes a wait keeps it well
// under what a reader loads.
const maxWaitsListed = 10000

// waiting notes that event (or task) id waits for h this tick.
func (k *King) waiting(eventID, taskID string, h *hold) {
	w := waits.Wait{EventID: eventID, TaskID: taskID, Reason: h.reason, Detail: h.detail}
	if !h.until.IsZero() {
		u := h.until.UTC()
		w.Until = &u
	}
	k.held.cur = append(k.held.cur, w)
	if k.held.levels == nil {
		k.held.levels = map[string]string{}
	}
	k.held.levels[waitID(w)] = h.level
}

func waitID(w waits.Wait) string {
	if w.EventID != "" {
		return w.EventID
	}
	return w.TaskID
}

// flushWaits ends the tick's account: it announces the waits whose reason
// changed, forgets those that ended, and writes the record if it changed.
func (k *King) flushWaits() {
	b := &k.held
	now := k.now().UTC()
	if !b.loaded {
		r, err := waits.Read(k.ctx(), k.kv)
		if err != nil {
			k.log.Warn("waits record unreadable; starting afresh", "err", err)
		}
		b.rec, b.loaded = r, true
		b.told = map[string]string{}
	}
	prev := b.rec.ByID()
	seen := make(map[string]bool, len(b.cur))
	for i := range b.cur {
		w := &b.cur[i]
		id := waitID(*w)
		seen[id] = true
		if p, ok := prev[id]; ok && p.Reason == w.Reason && !p.Since.IsZero() {
			w.Since = p.Since
		} else {
			w.Since = now
		}
		key := w.Reason + "|" + b.levels[id]
		if b.told[id] == key {
			continue
		}
		b.told[id] = key
		k.announceWait(*w)
	}
	for id := range b.told {
		if !seen[id] {
			delete(b.told, id)
		}
	}
	cur := b.cur
	b.cur, b.levels = nil, nil
	if len(cur) > maxWaitsListed {
		// Readers load at most a few MB (pkg/waits); a backlog past this
		// lists its first waits in queue order, which say why the rest wait.
		cur = cur[:maxWaitsListed]
	}
	if b.rec.UpdatedAt.IsZero() && len(cur) == 0 && len(b.rec.Waits) == 0 {
		return // nothing waits and nothing ever did: no file to write
	}
	if sameWaits(b.rec.Waits, cur) {
		return
	}
	rec := waits.Record{UpdatedAt: now, Waits: cur}
	if rec.Waits == nil {
		rec.Waits = []waits.Wait{}
	}
	if err := waits.Write(k.ctx(), k.kv, rec); err != nil {
		k.log.Warn("write the waits record", "err", err)
		return
	}
	b.rec = rec
}

// announceWait logs a wait whose reason is new and emits its event.
func (k *King) announceWait(w waits.Wait) {
	data := map[string]any{"reason": w.Reason, "detail": w.Detail}
	if w.Until != nil {
		data["until"] = doc.FormatTime(*w.Until)
	}
	if w.EventID != "" {
		data["event_id"] = w.EventID
		k.em.Emit("event.waiting", data)
		k.log.Info("event waits: "+w.Detail, "event", w.EventID, "reason", w.Reason)
		return
	}
	data["task_id"] = w.TaskID
	k.em.Emit("task.waiting", data)
	k.log.Info("task waits: "+w.Detail, "task", w.TaskID, "reason", w.Reason)
}

func sameWaits(a, b []waits.Wait) bool {
	return slices.EqualFunc(a, b, func(x, y waits.Wait) bool {
		return x.EventID == y.EventID && x.TaskID == y.TaskID && x.Reason == y.Reason && x.Detail == y.Detail &&
			x.Since.Equal(y.Since) && (x.Until == nil) == (y.Until == nil) && (x.Until == nil || x.Until.Equal(*y.Until))
	})
}

// taskWaits names why each pending task waits that its general may not
// claim yet: its engine's pause, its not_before (a retry's backoff), the
// operator's pause, or its general's max_concurrent. A task that waits for
// none of these is the general's to claim now and is not listed.
func (k *King) taskWaits(adm *admission) error {
	pending, err := k.tasks.List(layout.Pending)
	if err != nil || len(pending) == 0 {
		return err
	}
	running := map[string]int{}
	inprog, err := k.tasks.List(layout.InProgress)
	if err != nil {
		return err
	}
	for _, e := range inprog {
		var head struct {
			General string `json:"target_general"`
		}
		if e.Decode(&head) == nil {
			running[head.General]++
		}
	}
	now := k.now()
	for _, e := range pending {
		var t doc.Task
		if e.Decode(&t) != nil || t.ID == "" {
			continue
		}
		if h := k.taskHold(&t, adm, running, now); h != nil {
			k.waiting("", t.ID, h)
		}
	}
	return nil
}

func (k *King) taskHold(t *doc.Task, adm *admission, running map[string]int, now time.Time) *hold {
	if adm.money != nil {
		eng := k.engineOf(t.TargetGeneral)
		if until, ok := adm.money.pauses.Active(eng, now); ok {
			return &hold{reason: waits.EnginePause, level: eng, until: until,
				detail: fmt.Sprintf("engine %s paused by a usage limit until %s (`start resume --engine %s` lifts it)", eng, k.clockTime(until), eng)}
		}
	}
	if nb, err := doc.ParseTime(t.NotBefore); err == nil && nb.After(now) {
		return &hold{reason: waits.Backoff, until: nb,
			detail: fmt.Sprintf("attempt %d waits for its retry backoff until %s", t.RetryCount+1, k.clockTime(nb))}
	}
	if adm.operator != nil {
		return adm.operator
	}
	if m := k.routes.Manifest(t.TargetGeneral); m != nil && m.MaxConcurrent > 0 && running[t.TargetGeneral] >= m.MaxConcurrent {
		return &hold{reason: waits.MaxConcurrent,
			detail: fmt.Sprintf("%s runs %d task%s, its max_concurrent is %d", t.TargetGeneral, running[t.TargetGeneral], plural(running[t.TargetGeneral]), m.MaxConcurrent)}
	}
	return nil
}

// clockTime renders t for an operator in the king's zone: the time of day
// when it is today, else the date too.
func (k *King) clockTime(t time.Time) string {
	lt, now := t.In(k.loc), k.now().In(k.loc)
	if lt.Format("2006-01-02") == now.Format("2006-01-02") {
		return lt.Format("15:04 MST")
	}
	return lt.Format("2006-01-02 15:04 MST")
}
