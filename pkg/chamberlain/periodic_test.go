package chamberlain

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

func TestDaily_JobsRunOnceAtOrAfterTheirHour(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 10, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	r.load(e.clk.Now())
	at := func(day, hour, min int) time.Time { return time.Date(2026, 11, day, hour, min, 0, 0, time.Local) }
	steps := []struct {
		now  time.Time
		want bool
	}{
		{at(21, 10, 0), false}, // fresh install before 18:00: waits for the hour
		{at(21, 17, 59), false},
		{at(21, 18, 0), true},
		{at(21, 18, 0), false}, // once a day
		{at(21, 23, 0), false},
		{at(22, 9, 0), false},
		{at(22, 20, 30), true}, // down at 18:00: runs later that day
		{at(23, 18, 0), true},
	}
	for i, s := range steps {
		if got := r.due("report", 18, s.now, false); got != s.want {
			t.Fatalf("step %d (%s): due = %v, want %v", i, s.now.Format(time.Kitchen), got, s.want)
		}
	}
	// A fresh install after the hour does not split a day it did not watch.
	e2 := newEnv(t, at(21, 5, 0))
	r2 := e2.role(ModeDaemon)
	if r2.due("events-rotation", 0, at(21, 5, 0), false) {
		t.Fatal("split on the first start")
	}
	if !r2.due("events-rotation", 0, at(22, 0, 1), false) {
		t.Fatal("no split the next midnight")
	}
	if !r2.due("cleanup", 3, at(21, 5, 0), true) {
		t.Fatal("cleanup does not run on the first start after its hour")
	}
}

func TestRotateLogs_OverSizeToOld(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	e.cfg.Chamberlain.Retention.LogMaxMB = 1
	big := strings.Repeat("x", 1<<20+1)
	writeFile(t, e.l.SystemLog(), big)
	writeFile(t, e.l.TasksLog(), "small\n")
	writeFile(t, e.l.EventsLog(), big+"\n") // only split daily, never by size
	r := e.role(ModeDaemon)
	r.load(e.clk.Now())
	if err := r.rotateLogs(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(e.l.SystemLog() + ".old"); err != nil || len(b) != len(big) {
		t.Fatalf("system.log.old: %d bytes, %v", len(b), err)
	}
	if _, err := os.Stat(e.l.SystemLog()); err == nil {
		t.Fatal("system.log still there (the next write recreates it)")
	}
	if _, err := os.Stat(e.l.TasksLog() + ".old"); err == nil {
		t.Fatal("small log rotated")
	}
	if _, err := os.Stat(e.l.EventsLog() + ".old"); err == nil {
		t.Fatal("events.log size-rotated")
	}
	lr := e.events("recovery.log_rotated")
	if len(lr) != 1 || dataOf(t, lr[0])["file"] != "system.log" || dataOf(t, lr[0])["size_mb"] != 1.0 {
		t.Fatalf("log_rotated = %v", lr)
	}
}

func TestDailyReport_DocumentAndMessage(t *testing.T) {
	now := time.Date(2026, 11, 21, 18, 0, 0, 0, time.Local)
	e := newEnv(t, now.Add(-8*time.Hour))
	r := e.role(ModeDaemon)
	e.tick(r) // 10:00: the report waits for 18:00
	for i := 0; i < 3; i++ {
		e.emitAs("task.created", "king", map[string]any{"task_id": "t"})
		e.emitAs("soldier.spawned", "gen-pr", map[string]any{"task_id": "t"})
	}
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "t1", "duration_seconds": 400})
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "t2", "duration_seconds": 440})
	e.emitAs("task.failed", "gen-briefing", map[string]any{"task_id": "t3"})
	e.emitAs("task.needs_human", "gen-pr", map[string]any{"task_id": "t4"})
	e.clk.Set(now)
	e.tick(r)
	b, err := os.ReadFile(e.l.DailyReport("20261121"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.DailyReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := report.DailyReport{Type: "daily_report", Date: "2026-11-21",
		Tasks: report.Tasks{Created: 3, Completed: 2, Failed: 1, NeedsHuman: 1}, Soldiers: report.Soldiers{Spawned: 3}}
	if rep.Type != want.Type || rep.Date != want.Date || rep.Tasks != want.Tasks || rep.Soldiers != want.Soldiers || rep.AvgDurationSeconds["gen-pr"] != 420 {
		t.Fatalf("report = %+v", rep)
	}
	var reports []doc.Message
	for _, m := range e.messages() {
		if m.Type == doc.MessageReport {
			reports = append(reports, m)
		}
	}
	if len(reports) != 1 || !strings.Contains(reports[0].Content, "2 completed") || !strings.HasPrefix(reports[0].ID, "msg-chamberlain-report-20261121-") {
		t.Fatalf("report messages = %+v", reports)
	}
	e.clk.Advance(30 * time.Second)
	e.tick(r)
	if n := len(e.messages()); n != 1 {
		t.Fatalf("report queued again: %d messages", n)
	}
}

// The event log's retention is the store's (store.TrimEvents), run by the
// cluster duties at events_rotation.hour: on one machine events.log is
// split into the previous day's file, the reader finishes it there, and
// splits past retention.logs_days go.
func TestDaily_EventsLogSplitAndOldSplitsRemoved(t *testing.T) {
	start := time.Date(2026, 11, 21, 23, 0, 0, 0, time.Local)
	e := newEnv(t, start)
	e.cfg.Chamberlain.EventsRotation.Hour = 0
	e.cfg.Chamberlain.Retention.LogsDays = 7
	old := e.l.EventsLogDay("20261101")
	writeFile(t, old, "")
	aged := start.Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(old, aged, aged); err != nil {
		t.Fatal(err)
	}
	r := e.role(ModeDaemon)
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "task-20261121-001"})
	e.tick(r) // 23:00, fresh: the first split waits for the next midnight
	if _, err := os.Stat(e.l.EventsLogDay("20261121")); err == nil {
		t.Fatal("split on the first start")
	}
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "task-20261121-002"})
	e.clk.Set(start.Add(90 * time.Minute)) // 00:30 on the 22nd
	e.tick(r)
	b, err := os.ReadFile(e.l.EventsLogDay("20261121"))
	if err != nil {
		t.Fatalf("no split of the 21st: %v", err)
	}
	if n := strings.Count(string(b), "task.completed"); n != 2 {
		t.Fatalf("split holds %d task.completed lines, want 2", n)
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("a split older than logs_days survived")
	}
	// The reader read both lines once and goes on in the new events.log.
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "task-20261122-001"})
	e.clk.Advance(time.Minute)
	e.tick(r)
	if s := readStats(t, e); s.Totals.TaskCompleted != 3 {
		t.Fatalf("tasks completed counted %d, want 3", s.Totals.TaskCompleted)
	}
}
