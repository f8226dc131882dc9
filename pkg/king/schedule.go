package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// scheduleSent is state/king/schedule-sent.json: per "<general>:<name>" the
// due time (RFC 3339) of the last run fired (or deliberately skipped).
type scheduleSent map[string]string

func (k *King) loadScheduleSent() (scheduleSent, error) {
	s := scheduleSent{}
	b, err := os.ReadFile(k.l.KingScheduleSent())
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read schedule-sent: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		// A damaged file must not stop schedules; the event-id dedupe in
		// dispatched/ keeps a re-fire of this minute from duplicating.
		k.log.Warn("schedule-sent.json unreadable; starting afresh", "err", err)
		return scheduleSent{}, nil
	}
	return s, nil
}

// maxCatchUpSteps bounds the walk over missed runs (a minutely schedule
// over a 24 h window is 1440 steps).
const maxCatchUpSteps = 100000

// dueRun returns the latest run of sched in (last, now], and whether there
// is one. Runs missed while the king was down collapse into the latest.
func dueRun(sched interface{ Next(time.Time) time.Time }, last, now time.Time) (time.Time, bool) {
	next := sched.Next(last)
	if next.IsZero() || next.After(now) {
		return time.Time{}, false
	}
	due := next
	for i := 0; i < maxCatchUpSteps; i++ {
		n := sched.Next(due)
		if n.IsZero() || n.After(now) {
			break
		}
		due = n
	}
	return due, true
}

// processSchedules fires each manifest schedule's due run once (SPEC §4.4,
// §9.22): a synthetic event written straight into events/dispatched/ under
// schedule-<general>-<name>-<YYYYMMDDHHMM> (the no-replace write is the
// dedupe), then the rest of the dispatch. A run missed during downtime fires
// once on return if within schedules.catch_up_hours. Runs are held (not
// skipped) while admission would refuse a normal-priority task.
func (k *King) processSchedules(adm *admission) error {
	sent, err := k.loadScheduleSent()
	if err != nil {
		return err
	}
	now := k.now().In(k.loc)
	changed := false
	var errs []error
	for _, m := range k.routes.Manifests() {
		for _, s := range m.Schedules {
			key := m.Name + ":" + s.Name
			sched, err := config.ParseCron(s.Cron)
			if err != nil {
				k.log.Error("schedule has a bad cron expression", "schedule", key, "err", err)
				continue
			}
			last, err := time.Parse(time.RFC3339, sent[key])
			if err != nil {
				// First sight: runs from this minute on count; earlier ones
				// never happened for this schedule.
				last = now.Truncate(time.Minute).Add(-time.Nanosecond)
				sent[key] = last.Format(time.RFC3339Nano)
				changed = true
			}
			due, ok := dueRun(sched, last.In(k.loc), now)
			if !ok {
				continue
			}
			if now.Sub(due) > k.cfg.CatchUpWindow() {
				k.log.Info("missed schedule run older than the catch-up window skipped", "schedule", key, "due", due)
				sent[key] = due.Format(time.RFC3339)
				changed = true
				continue
			}
			if h := adm.holdFor(doc.PriorityNormal, m.Name); h != nil {
				k.log.Debug("schedule held", "schedule", key, "reason", h.detail)
				continue
			}
			if err := k.fireSchedule(m, s, due); err != nil {
				errs = append(errs, fmt.Errorf("schedule %s: %w", key, err))
				continue
			}
			adm.inFlight++
			sent[key] = due.Format(time.RFC3339)
			changed = true
		}
	}
	if changed {
		if err := atomicfile.WriteJSON(k.l.KingScheduleSent(), sent); err != nil {
			errs = append(errs, fmt.Errorf("write schedule-sent: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ScheduleEventID is the deterministic id of a schedule's run at due.
func ScheduleEventID(general, name string, due time.Time) string {
	return fmt.Sprintf("schedule-%s-%s-%s", general, name, due.Format("200601021504"))
}

func (k *King) fireSchedule(m *config.Manifest, s config.Schedule, due time.Time) error {
	id := ScheduleEventID(m.Name, s.Name, due)
	if err := ids.Check(id); err != nil {
		return err
	}
	repo := s.Repo
	if repo == "" {
		repo = m.DefaultRepo
	}
	payload := maps.Clone(s.Payload)
	if payload == nil {
		payload = map[string]any{}
	}
	// Round-trip so YAML-decoded values are plain JSON values.
	if b, err := json.Marshal(payload); err == nil {
		json.Unmarshal(b, &payload)
	}
	payload["schedule"] = s.Name
	payload["scheduled_for"] = doc.FormatTime(due)
	ev := &doc.Event{
		ID: id, Type: s.TaskType, Source: doc.SourceSchedule, Repo: doc.StringPtr(repo),
		Payload: payload, Priority: doc.PriorityNormal, CreatedAt: doc.FormatTime(k.now()),
	}
	err := k.dispatchAll([]routed{{ev: ev, general: m.Name}}, "")
	if errors.Is(err, queue.ErrExists) {
		k.log.Debug("schedule run already fired", "event", id)
		return nil
	}
	if err == nil {
		k.log.Info("schedule fired", "event", id, "general", m.Name)
	}
	return err
}
