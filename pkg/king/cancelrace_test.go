package king

import (
	"os"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The soldier published its raw success; its general has not finished the
// task yet. A cancel then is told the truth (the attempt finished), leaves
// no Cancelled mark, and the task completes ✅ with records that agree.
func TestControl_CancelAfterTheSoldiersSuccessSaysItFinished(t *testing.T) {
	f := started(t)
	writeJSON(t, f.l.ResultRaw(task1), map[string]any{"task_id": task1, "status": "success", "summary": "done"})
	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if rep.OK || rep.Message != "task "+task1+" already finished (success); nothing to cancel" {
		t.Fatalf("cancel reply %+v", rep)
	}
	if control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1) != nil {
		t.Fatal("a cancel record for an attempt that already succeeded")
	}
	if n := len(f.internal("task.cancelled")); n != 0 {
		t.Errorf("task.cancelled = %d, want 0", n)
	}
	f.finalResult(task1, map[string]any{"status": "success", "summary": "done"})
	f.tick()
	eq(t, "task status", f.task(layout.Completed, task1).Status, doc.TaskCompleted)
	if m := f.message("msg-" + task1 + "-done"); !strings.HasPrefix(m.Content, "✅") {
		t.Errorf("completion %q", m.Content)
	}
}

// A cancel that lost the race anyway (its record written, then the
// soldier's success got there first) leaves no record behind once the task
// completes: nothing says Cancelled about a completed task.
func TestControl_CompletedTaskKeepsNoCancelRecord(t *testing.T) {
	f := started(t)
	writeJSON(t, f.l.KingCancelled(task1), control.Cancelled{TaskID: task1, Was: layout.InProgress, By: "alice", At: doc.FormatTime(t0)})
	writeJSON(t, f.l.ResultRaw(task1), map[string]any{"task_id": task1, "status": "success", "summary": "done"})
	f.tick() // enforceCancels finds the soldier's success: the cancel lost
	if control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1) != nil {
		t.Error("the cancel record outlived a soldier's success")
	}
	writeJSON(t, f.l.KingCancelled(task1), control.Cancelled{TaskID: task1, Was: layout.InProgress, By: "alice", At: doc.FormatTime(t0)})
	f.finalResult(task1, map[string]any{"status": "success", "summary": "done"})
	f.tick()
	eq(t, "task status", f.task(layout.Completed, task1).Status, doc.TaskCompleted)
	if control.ReadCancelled(t.Context(), kv.OnStore(f.st), task1) != nil {
		t.Error("a completed task keeps a Cancelled record")
	}
}

// A cancel whose attempt already failed (final result waiting) makes the
// failure Cancelled, never a retry, and says so.
func TestControl_CancelAfterAFailureEndsCancelledNotRetried(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error": "boom", "error_reason": "EngineError"})
	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if !rep.OK || !strings.Contains(rep.Message, "already failed") {
		t.Fatalf("cancel reply %+v", rep)
	}
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	fl := f.internal("task.failed")
	if len(fl) != 1 || data(fl[0])["error_reason"] != doc.ReasonCancelled {
		t.Fatalf("task.failed = %+v", fl)
	}
}

// Cancelling a task that waits for a human's answer withdraws the question:
// it ends failed/Cancelled with a ⛔ in its thread, and a later reply there
// starts nothing.
func TestControl_CancelNeedsHumanWithdrawsTheQuestion(t *testing.T) {
	f := started(t)
	writeJSON(t, f.l.ResultCheckpoint(task1), map[string]any{"task_id": task1, "session_id": "sess-9",
		"workdir": "/w", "thread": map[string]any{"channel": "C1", "thread_ts": "1700.1"},
		"question": "Which branch?", "general": "gen-pr", "repo": "acme/web"})
	f.finalResult(task1, map[string]any{"status": "needs_human", "question": "Which branch?", "session_id": "sess-9"})
	f.tick()
	eq(t, "status before", f.task(layout.Completed, task1).Status, doc.ResultNeedsHuman)

	rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1, By: "alice"})
	if !rep.OK || !strings.Contains(rep.Message, "withdrawn") {
		t.Fatalf("cancel reply %+v", rep)
	}
	eq(t, "status after", f.task(layout.Completed, task1).Status, doc.ResultFailed)
	m := f.message("msg-" + task1 + "-failed")
	if !strings.HasPrefix(m.Content, "⛔") || doc.Deref(m.ThreadTS) != "1700.1" || m.Context["error_reason"] != doc.ReasonCancelled {
		t.Errorf("⛔ message %+v", m)
	}
	fl := f.internal("task.failed")
	if len(fl) != 1 || data(fl[0])["error_reason"] != doc.ReasonCancelled {
		t.Fatalf("task.failed = %+v", fl)
	}

	f.event("evt-slack-reply-1700-1-1700-9", "slack.thread.reply", "high", withSource("slack"),
		withPayload(replyPayload(map[string]any{"general": "gen-pr", "session_id": "sess-9", "repo": "acme/web", "task_id": task1})))
	f.tick()
	eqList(t, "tasks pending after the reply", f.ids(layout.QTasks, layout.Pending))
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-1", "evt-slack-reply-1700-1-1700-9")
	if len(f.internal("task.resumed")) != 0 {
		t.Error("a reply to a withdrawn question resumed the task")
	}
	// Even once the record has aged out, the failed task's status holds.
	os.Remove(f.l.KingCancelled(task1))
	f.event("evt-slack-reply-1700-1-1700-10", "slack.thread.reply", "high", withSource("slack"),
		withPayload(replyPayload(map[string]any{"general": "gen-pr", "session_id": "sess-9", "repo": "acme/web", "task_id": task1})))
	f.tick()
	eqList(t, "tasks pending after a late reply", f.ids(layout.QTasks, layout.Pending))

	// Cancelling again finds nothing to cancel.
	if rep := f.request(control.Request{Action: control.ActionCancel, TaskID: task1}); rep.OK {
		t.Errorf("second cancel %+v", rep)
	}
}
