package king

import (
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

const genBriefing = `name: gen-briefing
description: Status briefings.
default_repo: acme/ops
schedules:
  - name: half-hourly
    cron: "*/30 * * * *"
    task_type: briefing.status
    payload: {kind: short}
`

const genDaily = `name: gen-daily
description: Daily report.
schedules:
  - name: morning
    cron: "0 6 * * *"
    task_type: briefing.daily
`

func TestKing_ScheduleFiresEachDueMinuteOnce(t *testing.T) {
	f := newFixture(t, genBriefing)
	for range 120 { // one hour of injected time (10:00–10:59:30), a tick every 30 s
		f.tick()
		f.tick() // twice in the same instant: still once
		f.clk.Advance(30 * time.Second)
	}
	eqList(t, "schedule events", f.ids(layout.QEvents, layout.Dispatched),
		"schedule-gen-briefing-half-hourly-202611211000", "schedule-gen-briefing-half-hourly-202611211030")
	eqList(t, "tasks", f.ids(layout.QTasks, layout.Pending), "task-20261121-001", "task-20261121-002")
	tk := f.task(layout.Pending, "task-20261121-001")
	eq(t, "event_id", tk.EventID, "schedule-gen-briefing-half-hourly-202611211000")
	eq(t, "type", tk.Type, "briefing.status")
	eq(t, "target", tk.TargetGeneral, "gen-briefing")
	eq(t, "repo", doc.Deref(tk.Repo), "acme/ops")
	eq(t, "payload.kind", tk.Payload["kind"], any("short"))
	ev, _ := f.eventFile(layout.Dispatched, "schedule-gen-briefing-half-hourly-202611211000")
	eq(t, "source", ev.Source, "schedule")
	f.message("msg-task-20261121-001-start")
}

func TestKing_ScheduleCatchUpAfterDowntimeFiresOnce(t *testing.T) {
	f := newFixture(t, genBriefing)
	f.tick() // fires 10:00
	// The king is down for 3 hours (six runs missed), then restarts.
	f.clk.Advance(3*time.Hour + 10*time.Minute)
	f.newKing()
	f.tick()
	f.tick()
	eqList(t, "schedule events", f.ids(layout.QEvents, layout.Dispatched),
		"schedule-gen-briefing-half-hourly-202611211000", "schedule-gen-briefing-half-hourly-202611211300")
}

func TestKing_ScheduleCatchUpWindow(t *testing.T) {
	for _, c := range []struct {
		hours int
		fires bool
	}{{24, true}, {1, false}} {
		f := newFixture(t, genDaily)
		f.cfg.Schedules.CatchUpHours = c.hours
		f.clk.Set(time.Date(2026, 11, 21, 5, 59, 0, 0, time.UTC))
		f.tick()
		f.clk.Set(time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC))
		f.tick() // fires day 1
		f.clk.Set(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
		f.newKing()
		f.tick() // day 2's 06:00 run was missed 2 h ago
		want := []string{"schedule-gen-daily-morning-202611210600"}
		if c.fires {
			want = append(want, "schedule-gen-daily-morning-202611220600")
		}
		eqList(t, "events", f.ids(layout.QEvents, layout.Dispatched), want...)
	}
}

func TestKing_ScheduleHeldUnderOrangeHealth(t *testing.T) {
	f := newFixture(t, genBriefing)
	f.resources("orange", "ok", t0)
	f.tick()
	f.clk.Advance(5 * time.Minute)
	f.resources("orange", "ok", f.clk.Now())
	f.tick()
	eqList(t, "nothing fired under orange", f.ids(layout.QEvents, layout.Dispatched))
	f.resources("green", "ok", f.clk.Now())
	f.tick()
	f.tick()
	eqList(t, "held run fires once when green", f.ids(layout.QEvents, layout.Dispatched),
		"schedule-gen-briefing-half-hourly-202611211000")
}

func TestKing_ScheduleDedupeSurvivesLostState(t *testing.T) {
	f := newFixture(t, genBriefing)
	f.tick()
	// schedule-sent.json lost: the dispatched event id still dedupes.
	if err := removeFile(f.l.KingScheduleSent()); err != nil {
		t.Fatal(err)
	}
	f.newKing()
	f.tick()
	eq(t, "tasks", len(f.ids(layout.QTasks, layout.Pending)), 1)
}
