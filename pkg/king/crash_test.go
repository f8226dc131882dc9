package king

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// crashKing is cmd/king built with the crashpoints tag (crash.go), once
// per test binary and only when a crash test runs; TestMain removes it.
var crashKing struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if crashKing.dir != "" {
		os.RemoveAll(crashKing.dir)
	}
	os.Exit(code)
}

func crashKingBin(t *testing.T) string {
	t.Helper()
	crashKing.once.Do(func() {
		crashKing.dir, crashKing.err = os.MkdirTemp("", "king-crash-bin-")
		if crashKing.err != nil {
			return
		}
		crashKing.bin = filepath.Join(crashKing.dir, "king")
		out, err := exec.Command("go", "build", "-tags", "crashpoints", "-o", crashKing.bin,
			"github.com/kingdom-dev/kingdom/cmd/king").CombinedOutput()
		if err != nil {
			crashKing.err = fmt.Errorf("go build -tags crashpoints ./cmd/king: %w\n%s", err, out)
		}
	})
	if crashKing.err != nil {
		t.Fatal(crashKing.err)
	}
	return crashKing.bin
}

// runKilled runs `king --once` (built with crash points) over base in a
// real child process that SIGKILLs itself at point, and checks that it
// really died that way.
func runKilled(t *testing.T, base, point string) {
	t.Helper()
	cmd := exec.Command(crashKingBin(t), "--base-dir", base, "--once")
	cmd.Env = append(os.Environ(), envCrashAt+"="+point,
		"KINGDOM_TMUX_SOCKET=kingdom-test-king-crash-"+strconv.Itoa(os.Getpid()))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("king did not die at %s: err %v, output:\n%s", point, err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("king ended with %v, want SIGKILL; output:\n%s", err, out)
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
	runKilled(t, f.l.Base, crashAfterCompletionMessage)

	// The kill came inside the completion's transaction: none of it is
	// visible, and the restart does it all, once.
	done := "msg-" + task1 + "-done"
	eqList(t, "task still in progress after the kill", f.ids(layout.QTasks, layout.InProgress), task1)
	eq(t, "completion message before the kill", f.messagesWithID(done), 0)

	f.newKing()
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-1")
	eq(t, "done messages across pending/sent/failed", f.messagesWithID(done), 1)
	eq(t, "proclamations", f.messagesWithID("msg-"+task1+"-proclamation"), 1)
	eq(t, "task.completed", len(f.internal("task.completed")), 1)
}

func TestKing_CrashDuringDispatchLeavesExactlyOneTask(t *testing.T) {
	for _, point := range []string{crashAfterEventDispatched, crashAfterTaskWrite} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t, genPR)
			f.event("evt-1", "github.pr.review_requested", "normal")
			runKilled(t, f.l.Base, point)
			// The kill came inside the dispatch's transaction: none of it
			// is visible.
			eqList(t, "pending after the kill", f.ids(layout.QEvents, layout.Pending), "evt-1")
			eqList(t, "dispatched after the kill", f.ids(layout.QEvents, layout.Dispatched))
			eq(t, "tasks after the kill", f.tasksForEvent("evt-1"), 0)

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
