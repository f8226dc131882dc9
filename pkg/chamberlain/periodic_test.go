package chamberlain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
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

func TestCleanup_RemovesExpiredFilesOnly(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	e := newEnv(t, now)
	l := e.l
	old, recent := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
	expired := []string{
		filepath.Join(l.LogsDir(), "system.log.old"),
		l.EventsLogDay("20261112"),
		l.SessionLog("soldier-1-a"), l.SessionErr("soldier-1-a"),
		l.DailyReport("20261110"),
		l.ResultFinal("task-20261110-001"), l.ResultSoldierID("task-20261110-001"),
		l.Prompt("task-20261117-001"), // prompts: 3 days
		filepath.Join(l.QueueState(layout.QEvents, layout.Completed), "evt-x.json"),
		filepath.Join(l.QueueState(layout.QTasks, layout.Completed), "task-20261110-002.json"),
		filepath.Join(l.QueueState(layout.QMessages, layout.Sent), "msg-1.json"),
		filepath.Join(l.QueueState(layout.QMessages, layout.Failed), "msg-2.json"),
		filepath.Join(l.QueueState(layout.QEvents, layout.Rejected), "bad.json"),
		filepath.Join(l.QueueState(layout.QEvents, layout.Rejected), "bad.json.reason"),
		filepath.Join(l.InboxRejected(), "x.json"),
		l.PetitionResult("evt-slack-msg-1"),
	}
	kept := []string{
		l.SystemLog(), l.EventsLog(), // live logs are never aged out
		filepath.Join(l.LogsDir(), "tasks.log.old"), // recent
		l.ResultFinal("task-20261120-001"),
		filepath.Join(l.QueueState(layout.QTasks, layout.Pending), "task-20261110-003.json"), // active queues untouched
		filepath.Join(l.QueueState(layout.QTasks, layout.InProgress), "task-20261110-004.json"),
	}
	seenOld, seenKept := filepath.Join(l.SeenDir(), "evt-a"), filepath.Join(l.SeenDir(), "evt-b")
	for _, p := range expired {
		setMtime(t, p, old)
	}
	setMtime(t, seenOld, now.Add(-31*24*time.Hour))
	setMtime(t, seenKept, old) // seen markers: 30 days
	for _, p := range kept {
		setMtime(t, p, old)
	}
	setMtime(t, filepath.Join(l.LogsDir(), "tasks.log.old"), recent)
	setMtime(t, l.ResultFinal("task-20261120-001"), recent)
	// task dirs: the expired one goes, the one of an in-progress task stays.
	oldDir := l.TaskDir("gen-pr", "task-20261110-009")
	liveDir := l.TaskDir("gen-pr", "task-20261110-004")
	for _, d := range []string{oldDir, liveDir} {
		writeFile(t, filepath.Join(d, "repo", "f.txt"), "x")
		os.Chtimes(d, old, old)
	}
	r := e.role(ModeDaemon)
	r.load(now)
	if err := r.cleanup(now); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(expired, seenOld, oldDir) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived", p)
		}
	}
	for _, p := range append(kept, seenKept, liveDir) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	fc := e.events("recovery.files_cleaned")
	if len(fc) != 1 || dataOf(t, fc[0])["deleted_count"] != float64(len(expired)+2) {
		t.Fatalf("files_cleaned = %v, want %d", fc, len(expired)+2)
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
	var doc DailyReport
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := DailyReport{Type: "daily_report", Date: "2026-11-21",
		Tasks: ReportTasks{Created: 3, Completed: 2, Failed: 1, NeedsHuman: 1}, Soldiers: ReportSoldiers{Spawned: 3}}
	if doc.Type != want.Type || doc.Date != want.Date || doc.Tasks != want.Tasks || doc.Soldiers != want.Soldiers || doc.AvgDurationSeconds["gen-pr"] != 420 {
		t.Fatalf("report = %+v", doc)
	}
	var reports []schema.Message
	for _, m := range e.messages() {
		if m.Type == schema.MessageReport {
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

// SPEC §10.5: a task dir that retention removes takes the engines' stored
// sessions with it (a question never answered, a conversation gone quiet):
// claude's project directory of the task's cwd, codex's rollout of its
// thread. Another task's sessions stay.
func TestCleanup_TaskDirTakesItsEngineSessionsAlong(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 30, 0, 0, time.Local)
	e := newEnv(t, now)
	l := e.l
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	old := now.Add(-30 * 24 * time.Hour)
	const task, other = "task-20261020-001", "task-20261120-002"
	const sess, otherSess = "0b7f3c1e-2a4d-4c6b-9e8f-1a2b3c4d5e6f", "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	taskDir, otherDir := l.TaskDir("gen-herald", task), l.TaskDir("gen-herald", other)
	writeFile(t, filepath.Join(taskDir, "repo", "f.txt"), "x")
	writeFile(t, filepath.Join(otherDir, "repo", "f.txt"), "x")
	os.Chtimes(taskDir, old, old)
	writeFile(t, l.ResultFinal(task), `{"session_id":"`+sess+`"}`)
	claudeProj := engine.ClaudeProjectDir(filepath.Join(home, ".claude"), filepath.Join(taskDir, "repo"))
	otherProj := engine.ClaudeProjectDir(filepath.Join(home, ".claude"), filepath.Join(otherDir, "repo"))
	writeFile(t, filepath.Join(claudeProj, sess+".jsonl"), "{}\n")
	writeFile(t, filepath.Join(otherProj, otherSess+".jsonl"), "{}\n")
	rollout := filepath.Join(home, ".codex", "sessions", "2026", "10", "20", "rollout-2026-10-20T10-00-00-"+sess+".jsonl")
	otherRollout := filepath.Join(home, ".codex", "sessions", "2026", "11", "20", "rollout-2026-11-20T10-00-00-"+otherSess+".jsonl")
	writeFile(t, rollout, "{}\n")
	writeFile(t, otherRollout, "{}\n")

	r := e.role(ModeDaemon)
	r.load(now)
	if err := r.cleanup(now); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{taskDir, claudeProj, rollout} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived the task dir's retention", p)
		}
	}
	for _, p := range []string{otherDir, filepath.Join(otherProj, otherSess+".jsonl"), otherRollout} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed with another task: %v", p, err)
		}
	}
}
