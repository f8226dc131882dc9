package king

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// request submits a control request and runs the tick that answers it.
func (f *fixture) request(r control.Request) *control.Reply {
	f.t.Helper()
	id, err := control.Submit(f.t.Context(), kv.OnStore(f.st), r, f.clk.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	f.tick()
	ctx, cancel := context.WithTimeout(f.t.Context(), 60*time.Second)
	defer cancel()
	rep, err := control.WaitReply(ctx, kv.OnStore(f.st), id, 0)
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
	p, err := control.ReadPause(t.Context(), kv.OnStore(f.st))
	if err != nil || p == nil || p.By != "alice@host" || p.Since != doc.FormatTime(t0) {
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
	if control.Paused(t.Context(), kv.OnStore(f.st)) {
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
	eq(t, "task status", f.task(layout.Completed, task1).Status, doc.ResultFailed)
	m := f.message("msg-" + task1 + "-failed")
	if !strings.HasPrefix(m.Content, "⛔") || !strings.Contains(m.Content, "cancelled") {
		t.Errorf("content %q", m.Content)
	}
	eq(t, "error_reason", m.Context["error_reason"], any(doc.ReasonCancelled))
	failed := f.internal("task.failed")
	if len(failed) != 1 || data(failed[0])["error_reason"] != doc.ReasonCancelled || data(failed[0])["terminal"] != true {
		t.Fatalf("task.failed = %+v", failed)
	}
	if rec := control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1); rec == nil || rec.Was != layout.Pending {
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
	if control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1) != nil {
		t.Error("the record of a long-finished cancel was kept")
	}
}

// A running task: the king only records the cancel (SPEC §12.1), the
// general owning the soldier kills it, and the final result the general
// writes ends the task ⛔ without a retry.
func TestControl_CancelRunningTaskIsRecordedForItsGeneral(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)

	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if !rep.OK || !strings.Contains(rep.Message, "the general running it kills its soldier") {
		t.Fatalf("cancel reply %+v", rep)
	}
	rec := control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1)
	if rec == nil || rec.Was != layout.InProgress || rec.By != "alice" {
		t.Fatalf("cancel record %+v", rec)
	}
	if _, err := os.Stat(f.l.ResultRaw(task1)); err == nil {
		t.Error("the king wrote the attempt's raw result: that is its general's")
	}
	f.tick()
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
	rep, err := control.WaitReply(t.Context(), kv.OnStore(f.st), "ctl-1-bad", 0)
	if err != nil || rep.OK || !strings.Contains(rep.Message, "unknown action") {
		t.Fatalf("reply %+v, %v", rep, err)
	}
}

// An unpark filed through control.Submit with the typed Target lifts the
// park; one filed raw without a target is refused by Validate and lifts
// nothing.
func TestControl_UnparkReadsTheTypedTarget(t *testing.T) {
	f := parkFixture(t)
	id := "ctl-1-notarget"
	if err := kv.PutJSON(t.Context(), kv.OnStore(f.st), kv.NSControl, id,
		map[string]any{"id": id, "action": control.ActionUnpark, "by": "mallory"}); err != nil {
		t.Fatal(err)
	}
	f.tick()
	rep, err := control.WaitReply(t.Context(), kv.OnStore(f.st), id, 0)
	if err != nil || rep.OK || !strings.Contains(rep.Message, "request refused") || !strings.Contains(rep.Message, "target") {
		t.Fatalf("unpark without a target: %+v %v", rep, err)
	}
	if len(f.parks()) != 1 {
		t.Fatalf("an unpark without a target lifted a park: %+v", f.parks())
	}
	rep = f.request(control.Request{Action: control.ActionUnpark, Target: "general:gen-pr", By: "alice@host"})
	if !rep.OK || !strings.Contains(rep.Message, "unparked general gen-pr") {
		t.Fatalf("reply %+v", rep)
	}
	if len(f.parks()) != 0 {
		t.Fatalf("parks = %+v", f.parks())
	}
}
