package chamberlain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// eventBatch is how many events one store read returns.
const eventBatch = 500

// consume reads the internal events after the cluster duties' cursor into
// stats, anomaly and report state. The cursor lives in the store
// (eventlog.NSCursors, key ClusterLease), so the next host to lead the
// cluster duties resumes where this one stopped; the caller saves the
// state and then the cursor (saveCursor).
func (r *Role) consume(ctx context.Context) error {
	if !r.curLoaded {
		vctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
		b, err := r.st.Value(vctx, eventlog.NSCursors, ClusterLease)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("open events cursor: %w", err)
		}
		r.cur, r.savedCur, r.curLoaded = store.Cursor(b), store.Cursor(b), true
	}
	defer func() { r.stats.UpdatedAt = doc.FormatTime(r.clk.Now()) }()
	for {
		ectx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
		evs, err := r.st.Events(ectx, r.cur, eventBatch)
		cancel()
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		for _, ev := range evs {
			r.apply(eventlog.Event{TS: ev.TS, Type: ev.Type, Actor: ev.Actor, Data: ev.Data})
			r.cur = ev.Cursor
		}
		if len(evs) < eventBatch {
			return nil
		}
	}
}

// saveCursor stores the cursor once it moved, fenced by the cluster lease:
// a host that lost the duties never moves the next leader's place.
func (r *Role) saveCursor(ctx context.Context) error {
	if !r.curLoaded || r.cur == r.savedCur {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
	defer cancel()
	err := r.st.Update(ctx, func(tx store.Tx) error {
		if r.lease != nil {
			tx.Fence(r.lease)
		}
		return tx.Set(eventlog.NSCursors, ClusterLease, []byte(r.cur))
	})
	if err != nil {
		return fmt.Errorf("save events cursor: %w", err)
	}
	r.savedCur = r.cur
	return nil
}

// apply folds one event into the accounts (package report) and the
// anomaly detectors.
func (r *Role) apply(ev eventlog.Event) {
	d := report.Decode(ev)
	report.Apply(&r.stats, &r.state.Report, ev, d)
	an := &r.anomaly
	at := ev.Time()
	if at.IsZero() {
		at = r.clk.Now()
	}
	switch ev.Type {
	case "task.completed":
		// A success ends a failure streak: only truly consecutive failures count.
		delete(an.Consecutive, report.GeneralOf(ev, d))
	case "task.failed":
		an.Consecutive[report.GeneralOf(ev, d)]++
	case "soldier.timeout":
		an.Timeouts = append(an.Timeouts, at)
	case "event.detected":
		if d.EventID != "" {
			if _, ok := an.Detected[d.EventID]; !ok {
				an.Detected[d.EventID] = at
			}
		}
	case "general.results_unwritable":
		var v struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(ev.Data, &v)
		an.Unwritable[ev.Actor] = v.Error
	case "general.results_writable":
		delete(an.Unwritable, ev.Actor)
	case "event.dispatched", "event.discarded":
		delete(an.Detected, d.EventID)
		delete(an.StaleAlerted, d.EventID)
	}
}

// anomalies evaluates the detectors at now: failure streaks and the
// timeout spike as alert conditions, and stale events (returned once each,
// to be warned about and alerted once).
func (r *Role) anomalies(ctx context.Context, now time.Time) (conds []condition, stale []string) {
	an := &r.anomaly
	for actor, n := range an.Consecutive {
		if n >= r.c.Anomaly.ConsecutiveFailures {
			conds = append(conds, condition{Kind: KindFailures, Key: actor, Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("[anomaly] %s failed %d tasks in a row — a problem in its domain?", actor, n)})
		}
	}
	for actor, msg := range an.Unwritable {
		conds = append(conds, condition{Kind: KindResults, Key: actor, Urgency: doc.UrgencyHigh,
			Content: fmt.Sprintf("[urgent] %s cannot write task results (%s): finished agents wait for the write, none runs again; free disk space", actor, redact.Clip(msg, 200))})
	}
	hourAgo := now.Add(-time.Hour)
	kept := an.Timeouts[:0]
	for _, t := range an.Timeouts {
		if t.After(hourAgo) && !t.After(now.Add(time.Minute)) {
			kept = append(kept, t)
		}
	}
	an.Timeouts = kept
	if len(kept) >= r.c.Anomaly.TimeoutSpike {
		conds = append(conds, condition{Kind: KindTimeouts, Key: "last-hour", Urgency: doc.UrgencyNormal,
			Content: fmt.Sprintf("[anomaly] %d soldier timeouts in the last hour — the system may be overloaded", len(kept))})
	}
	if control.Paused(ctx, r.kv) {
		// The operator paused the kingdom: events wait on purpose (§10.11).
		return conds, nil
	}
	staleAfter := r.c.EventStale()
	for id, t := range an.Detected {
		age := now.Sub(t)
		if age < staleAfter {
			continue
		}
		// Level-triggered: an event the king has moved on is handled even if
		// its event.dispatched line was lost.
		if s, ok := r.events.Find(id); !ok || (s != layout.Pending && s != layout.Petitioning) {
			delete(an.Detected, id)
			delete(an.StaleAlerted, id)
			continue
		}
		if _, done := an.StaleAlerted[id]; done {
			if age > 7*24*time.Hour {
				delete(an.Detected, id)
				delete(an.StaleAlerted, id)
			}
			continue
		}
		stale = append(stale, id)
	}
	return conds, stale
}
