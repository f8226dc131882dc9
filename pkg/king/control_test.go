package king

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// request submits a control request and runs the tick that answers it.
func (f *fixture) request(r control.Request) *control.Reply {
	f.t.Helper()
	id, err := control.Submit(f.t.Context(), kv.Files(f.l), r, f.clk.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	f.tick()
	ctx, cancel := context.WithTimeout(f.t.Context(), time.Second)
	defer cancel()
	rep, err := control.WaitReply(ctx, kv.Files(f.l), id, 0)
	if err != nil {
		f.t.Fatalf("no reply to %s: %v", r.Action, err)
	}
	if _, err := os.Stat(filepath.Join(f.l.KingControlDir(), id+".json")); err == nil {
		f.t.Errorf("request %s left in the control dir", id)
	}
	return rep
}

func TestControl_PauseHoldsEventsAndSchedulesResumeAdmits(t *testing.T) {
	f := newFixture(t, genPR+"schedules:\n  - name: nightly\n    cron: \"* * * * *\"\n    task_type: sweep\n")
	rep := f.request(control.Request{Action: control.ActionPause, By: "alice@host"})
	if !rep.OK || !strings.Contains(rep.Message, "paused") {
		t.Fatalf("pause reply %+v", rep)
	}
	p, err := control.ReadPause(t.Context(), kv.Files(f.l))
	if err != nil || p == nil || p.By != "alice@host" || p.Since != schema.FormatTime(t0) {
		t.Fatalf("paused.json = %+v, %v", p, err)
	}
	f.event("evt-1", "github.pr.review_requested", "high")
	f.clk.Advance(2 * time.Minute)
	f.tick()
	f.tick()
	eqList(t, "events/pending while paused", f.ids(layout.QEvents, layout.Pending), "evt-1")
	eqList(t, "tasks while paused", f.ids(layout.QTasks, layout.Pending))
	if rep := f.request(control.Request{Action: control.ActionPause, By: "bob"}); !rep.OK || !strings.Contains(rep.Message, "already paused") {
		t.Fatalf("second pause %+v", rep)
	}
	if len(f.internal("system.paused")) != 1 {
		t.Errorf("system.paused emitted %d times", len(f.internal("system.paused")))
	}

	if rep := f.request(control.Request{Action: control.ActionResume, By: "alice@host"}); !rep.OK || rep.Message != "resumed" {
		t.Fatalf("resume reply %+v", rep)
	}
	if control.Paused(t.Context(), kv.Files(f.l)) {
		t.Fatal("still paused after resume")
	}
	f.tick()
	eqList(t, "events/pending after resume", f.ids(layout.QEvents, layout.Pending))
	if n := len(f.ids(layout.QTasks, layout.Pending)); n != 2 {
		t.Fatalf("tasks after resume = %d, want the event's and the held schedule's", n)
	}
}

func TestControl_CancelPendingTaskIsFailedCancelledAtOnce(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.event("evt-2", "github.pr.review_requested", "normal", withCreated(t0.Add(time.Second)))
	f.tick()
	eqList(t, "tasks", f.ids(layout.QTasks, layout.Pending), task1)

	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if !rep.OK || !strings.Contains(rep.Message, "pending") {
		t.Fatalf("cancel reply %+v", rep)
	}
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eq(t, "task status", f.task(layout.Completed, task1).Status, schema.ResultFailed)
	m := f.message("msg-" + task1 + "-failed")
	if !strings.HasPrefix(m.Content, "⛔") || !strings.Contains(m.Content, "cancelled") {
		t.Errorf("content %q", m.Content)
	}
	eq(t, "error_reason", m.Context["error_reason"], any(schema.ReasonCancelled))
	failed := f.internal("task.failed")
	if len(failed) != 1 || data(failed[0])["error_reason"] != schema.ReasonCancelled || data(failed[0])["terminal"] != true {
		t.Fatalf("task.failed = %+v", failed)
	}
	if rec := control.ReadCancelled(t.Context(), kv.Files(f.l), task1); rec == nil || rec.Was != layout.Pending {
		t.Fatalf("cancel record %+v", rec)
	}
	// The slot is free: the next event is dispatched (max_soldiers 1).
	f.tick()
	if n := len(f.ids(layout.QTasks, layout.Pending)); n != 1 {
		t.Fatalf("second event not dispatched after the cancel freed the slot (pending tasks %d)", n)
	}
	if rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1}); rep.OK || !strings.Contains(rep.Message, "already finished") {
		t.Fatalf("second cancel %+v", rep)
	}
	if rep := f.request(control.Request{Action: control.ActionCancel, TaskID: "task-20991231-001"}); rep.OK {
		t.Fatalf("cancel of an unknown task %+v", rep)
	}
	f.clk.Advance(cancelRetention + time.Hour)
	f.tick()
	if control.ReadCancelled(t.Context(), kv.Files(f.l), task1) != nil {
		t.Error("the record of a long-finished cancel was kept")
	}
}

// A running task: the soldier's tmux session and every process below it
// (here a child that left the group with setsid) are killed, the Cancelled
// raw result is written for the general, and the final result it writes
// ends the task ⛔ without a retry.
func TestControl_CancelRunningTaskKillsTheSoldierTree(t *testing.T) {
	f := newFixture(t, genPR)
	tm := &tmux.Client{Bin: "tmux", Socket: fmt.Sprintf("kingdom-test-king-ctl-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { tm.KillServer(context.Background()) })
	f.k.tm = tm
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)

	sid := "soldier-1795000000-abcd"
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	if err := sessions.New(f.l).Add(sessions.Entry{ID: sid, TaskID: task1, General: "gen-pr", StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := tm.NewSession(t.Context(), sid, tmux.NewOptions{}, "sh", "-c", `setsid sleep 300 & echo $! > "$0"; sleep 300`, pidFile); err != nil {
		t.Fatal(err)
	}
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; {
		if time.Now().After(deadline) {
			t.Fatal("soldier's child never started")
		}
		time.Sleep(20 * time.Millisecond) // a real process starting in tmux
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}

	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if !rep.OK || !strings.Contains(rep.Message, sid) {
		t.Fatalf("cancel reply %+v", rep)
	}
	if alive, _ := tm.Has(t.Context(), sid); alive {
		t.Error("soldier session still alive")
	}
	for deadline := time.Now().Add(5 * time.Second); proctree.Alive(child); {
		if time.Now().After(deadline) {
			t.Fatalf("the soldier's child %d survived the cancel", child)
		}
		time.Sleep(20 * time.Millisecond) // the kernel reaps asynchronously
	}
	raw, err := os.ReadFile(f.l.ResultRaw(task1))
	if err != nil || !strings.Contains(string(raw), `"Cancelled"`) {
		t.Fatalf("raw result %s, %v", raw, err)
	}
	eqList(t, "still in progress until the general's final result", f.ids(layout.QTasks, layout.InProgress), task1)

	// The general saw its session die first and wrote SoldierDied: the
	// cancel record still makes it Cancelled, never a retry.
	f.finalResult(task1, map[string]any{"status": "killed", "error": "soldier session ended", "error_reason": "SoldierDied"})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "tasks/pending (no retry)", f.ids(layout.QTasks, layout.Pending))
	m := f.message("msg-" + task1 + "-failed")
	if !strings.HasPrefix(m.Content, "⛔") {
		t.Errorf("content %q", m.Content)
	}
	if n := len(f.internal("task.retry_scheduled")); n != 0 {
		t.Errorf("retries scheduled: %d", n)
	}
}

func TestControl_BadRequestIsAnsweredAndRemoved(t *testing.T) {
	f := newFixture(t, genPR)
	path := filepath.Join(f.l.KingControlDir(), "ctl-1-bad.json")
	os.WriteFile(path, []byte(`{"id":"ctl-1-bad","action":"explode"}`), 0o600)
	f.tick()
	if _, err := os.Stat(path); err == nil {
		t.Fatal("bad request left in place")
	}
	rep, err := control.WaitReply(t.Context(), kv.Files(f.l), "ctl-1-bad", 0)
	if err != nil || rep.OK || !strings.Contains(rep.Message, "unknown action") {
		t.Fatalf("reply %+v, %v", rep, err)
	}
}
