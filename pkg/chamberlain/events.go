package chamberlain

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// consume reads the internal events appended since the cursor (O(new
// bytes)) into stats, anomaly and report state. The caller saves the state
// and then the cursor.
func (r *Role) consume() error {
	if r.cursor == nil {
		c, err := r.openReader()
		if err != nil {
			return fmt.Errorf("open events cursor: %w", err)
		}
		r.cursor = c
	}
	// Only the file cursor meets torn lines; a store's rows are whole.
	fc, _ := r.cursor.(*eventlog.Cursor)
	before := 0
	if fc != nil {
		before = fc.Corrupt
	}
	_, err := r.cursor.Poll(r.apply)
	if fc != nil {
		if d := fc.Corrupt - before; d > 0 {
			r.stats.CorruptLines += int64(d)
			r.log.Warn("skipped corrupt lines in events.log", "count", d)
		}
	}
	r.stats.UpdatedAt = schema.FormatTime(r.clk.Now())
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	return nil
}

// openReader opens the event-log reader: logs/events.log with its cursor
// file, or in PostgreSQL mode the store's event log with the cursor saved
// in the store, so the next host to lead the cluster duties resumes there.
func (r *Role) openReader() (eventlog.Reader, error) {
	if r.st != nil {
		return eventlog.OpenStoreReader(r.st, ClusterLease)
	}
	return eventlog.OpenCursor(r.l.EventsLog(), r.l.ChamberlainCursor())
}

// apply folds one event into the accounts (package report) and the
// anomaly detectors. It must not log or emit: it also runs under the
// exclusive rotation lock.
func (r *Role) apply(ev eventlog.Event) error {
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
	return nil
}

// anomalies evaluates the detectors at now: failure streaks and the
// timeout spike as alert conditions, and stale events (returned once each,
// to be warned about and alerted once).
func (r *Role) anomalies(now time.Time) (conds []condition, stale []string) {
	an := &r.anomaly
	for actor, n := range an.Consecutive {
		if n >= r.c.Anomaly.ConsecutiveFailures {
			conds = append(conds, condition{Kind: KindFailures, Key: actor, Urgency: schema.UrgencyNormal,
				Content: fmt.Sprintf("[anomaly] %s failed %d tasks in a row — a problem in its domain?", actor, n)})
		}
	}
	for actor, msg := range an.Unwritable {
		conds = append(conds, condition{Kind: KindResults, Key: actor, Urgency: schema.UrgencyHigh,
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
		conds = append(conds, condition{Kind: KindTimeouts, Key: "last-hour", Urgency: schema.UrgencyNormal,
			Content: fmt.Sprintf("[anomaly] %d soldier timeouts in the last hour — the system may be overloaded", len(kept))})
	}
	if control.Paused(context.Background(), r.kv) {
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
