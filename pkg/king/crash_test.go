package king

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// TestHelperKingProcess is not a test: run by the crash tests as a child
// process (the test binary itself), it builds a king over
// $KING_HELPER_BASE and runs one tick, with KINGDOM_KING_CRASH_AT set.
func TestHelperKingProcess(t *testing.T) {
	base := os.Getenv("KING_HELPER_BASE")
	if base == "" {
		t.Skip("helper process only")
	}
	l := layout.New(base)
	cfg := config.DefaultKing()
	cfg.Concurrency.MaxSoldiers = 100
	k, err := New(Options{Layout: l, Config: cfg, Location: time.UTC,
		Events: eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "king", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	os.Exit(0) // reaching here means the crash point was never hit
}

// runKilled runs one king tick in a real child process that SIGKILLs
// itself at point, and checks that it really died that way.
func runKilled(t *testing.T, base, point string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKingProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KING_HELPER_BASE="+base, EnvCrashAt+"="+point)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper did not die at %s: err %v, output:\n%s", point, err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL; output:\n%s", err, out)
	}
}

// messagesWithID counts files named id across the messages states.
func (f *fixture) messagesWithID(id string) int {
	n := 0
	for _, st := range []string{layout.Pending, layout.Sent, layout.Failed, layout.Rejected} {
		if _, err := os.Stat(filepath.Join(f.l.QueueState(layout.QMessages, st), id+".json")); err == nil {
			n++
		}
	}
	return n
}

// tasksForEvent counts task files (any state) whose event_id is ev.
func (f *fixture) tasksForEvent(ev string) int {
	n := 0
	for _, st := range layout.QueueStates[layout.QTasks] {
		for _, id := range f.ids(layout.QTasks, st) {
			if f.task(st, id).EventID == ev {
				n++
			}
		}
	}
	return n
}

func TestKing_CrashAfterCompletionMessageNoDuplicate(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "ok",
		"proclamation": map[string]any{"channel": "C-TEAM", "message": "news"}})
	runKilled(t, f.l.Base, CrashAfterCompletionMessage)

	done := "msg-" + task1 + "-done"
	eqList(t, "task still in progress after the kill", f.ids(layout.QTasks, layout.InProgress), task1)
	eq(t, "completion message written before the kill", f.messagesWithID(done), 1)
	// The envoy already sent it.
	if err := os.Rename(filepath.Join(f.l.QueueState(layout.QMessages, layout.Pending), done+".json"),
		filepath.Join(f.l.QueueState(layout.QMessages, layout.Sent), done+".json")); err != nil {
		t.Fatal(err)
	}

	f.newKing()
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-1")
	eq(t, "done messages across pending/sent/failed", f.messagesWithID(done), 1)
	eq(t, "proclamations", f.messagesWithID("msg-"+task1+"-proclamation"), 1)
	eq(t, "task.completed", len(f.internal("task.completed")), 1)
}

func TestKing_CrashDuringDispatchLeavesExactlyOneTask(t *testing.T) {
	for _, point := range []string{CrashAfterEventDispatched, CrashAfterTaskWrite} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t, genPR)
			f.event("evt-1", "github.pr.review_requested", "normal")
			runKilled(t, f.l.Base, point)
			eqList(t, "dispatched before the kill", f.ids(layout.QEvents, layout.Dispatched), "evt-1")

			f.newKing()
			f.tick()
			f.tick()
			eqList(t, "events/pending", f.ids(layout.QEvents, layout.Pending))
			eqList(t, "events/dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
			eq(t, "tasks for the event", f.tasksForEvent("evt-1"), 1)
			ev, _ := f.eventFile(layout.Dispatched, "evt-1")
			tk := f.task(layout.Pending, ev.TaskID)
			eq(t, "task general", tk.TargetGeneral, "gen-pr")
			if !strings.HasPrefix(tk.ID, "task-") {
				t.Errorf("task id %q", tk.ID)
			}
			eq(t, "thread_start", f.messagesWithID("msg-"+tk.ID+"-start"), 1)
			eq(t, "messages in total", len(f.ids(layout.QMessages, layout.Pending)), 1)
		})
	}
}

// A king killed inside a group commit (the first dispatched copy renamed,
// the others not yet) leaves every event recoverable: after a restart each
// has exactly one task and one thread_start (issue #15.2).
func TestKing_CrashInsideADispatchBatchLeavesExactlyOneTaskEach(t *testing.T) {
	f := newFixture(t, genPR)
	evs := []string{"evt-1", "evt-2", "evt-3", "evt-4"}
	for _, id := range evs {
		f.event(id, "github.pr.review_requested", "normal")
	}
	runKilled(t, f.l.Base, CrashInDispatchBatch)
	if got := len(f.ids(layout.QEvents, layout.Dispatched)); got != 1 {
		t.Fatalf("dispatched copies before the kill = %d, want 1 (killed after the first rename)", got)
	}
	eq(t, "pending copies before the kill", len(f.ids(layout.QEvents, layout.Pending)), len(evs))

	f.newKing()
	f.tick()
	f.tick()
	eqList(t, "events/pending", f.ids(layout.QEvents, layout.Pending))
	eq(t, "events/dispatched", len(f.ids(layout.QEvents, layout.Dispatched)), len(evs))
	taskIDs := map[string]bool{}
	for _, id := range evs {
		eq(t, "tasks for "+id, f.tasksForEvent(id), 1)
		ev, _ := f.eventFile(layout.Dispatched, id)
		if taskIDs[ev.TaskID] {
			t.Errorf("task id %s issued twice", ev.TaskID)
		}
		taskIDs[ev.TaskID] = true
		eq(t, "thread_start of "+ev.TaskID, f.messagesWithID("msg-"+ev.TaskID+"-start"), 1)
	}
	eq(t, "messages in total", len(f.ids(layout.QMessages, layout.Pending)), len(evs))
	eq(t, "task.created", len(f.internal("task.created")), len(evs))
}
