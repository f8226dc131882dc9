package king

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A king killed inside a results batch (the first completion message
// renamed into place, the others not yet) leaves every task recoverable:
// after a restart each completes once, with exactly one ✅ and one
// task.completed (issue #15.2).
func TestKing_CrashInsideAResultBatchCompletesEachTaskOnce(t *testing.T) {
	f := newFixture(t, genPR)
	evs := []string{"evt-1", "evt-2", "evt-3"}
	for _, id := range evs {
		f.event(id, "github.pr.review_requested", "normal")
	}
	f.tick()
	tasks := f.ids(layout.QTasks, layout.Pending)
	if len(tasks) != len(evs) {
		t.Fatalf("tasks %v, want %d", tasks, len(evs))
	}
	for _, id := range tasks {
		f.claim(id)
		f.finalResult(id, map[string]any{"status": "success", "summary": "ok"})
	}
	runKilled(t, f.l.Base, CrashInResultBatch)
	done := 0
	for _, id := range tasks {
		done += f.messagesWithID("msg-" + id + "-done")
	}
	eq(t, "done messages before the kill", done, 1)
	eq(t, "tasks in progress before the kill", len(f.ids(layout.QTasks, layout.InProgress)), len(tasks))

	f.newKing()
	f.tick()
	f.tick()
	eqList(t, "tasks/in_progress", f.ids(layout.QTasks, layout.InProgress))
	eq(t, "tasks/completed", len(f.ids(layout.QTasks, layout.Completed)), len(tasks))
	eq(t, "events/completed", len(f.ids(layout.QEvents, layout.Completed)), len(evs))
	for _, id := range tasks {
		eq(t, "done messages of "+id, f.messagesWithID("msg-"+id+"-done"), 1)
		eq(t, "status of "+id, f.task(layout.Completed, id).Status, "completed")
	}
	eq(t, "task.completed", len(f.internal("task.completed")), len(tasks))
}
