package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// holdSoldier is the command engine of the operator tests: a task whose
// payload says hold_me starts a child process (its pid in child-<task>.pid)
// and works until release-<task> exists; every task then succeeds.
const holdSoldier = `#!/bin/sh
task="$1"; result="$2"; base="$KINGDOM_BASE_DIR"
if grep -q hold_me "$base/queue/tasks/in_progress/$task.json"; then
  sleep 600 &
  echo $! > "$base/child-$task.pid"
  while [ ! -f "$base/release-$task" ]; do sleep 0.1; done
fi
printf '{"task_id":"%s","status":"success","summary":"done %s"}' "$task" "$task" > "$result"
`

func newOperatorKingdom(t *testing.T, maxSoldiers int) *Kingdom {
	script := filepath.Join(t.TempDir(), "hold-soldier.sh")
	if err := os.WriteFile(script, []byte(holdSoldier), 0o700); err != nil {
		t.Fatal(err)
	}
	k := NewKingdom(t, map[string]string{
		"config/system.yaml":           fmt.Sprintf("runtime:\n  engine: command\n  command:\n    argv: [\"/bin/sh\", %q, \"{task_id}\", \"{result_path}\"]\n", script),
		"config/sentinel.yaml":         "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/king.yaml":             fmt.Sprintf("concurrency:\n  max_soldiers: %d\nretry:\n  max_attempts: 2\n  backoff_seconds: 1\n", maxSoldiers),
		"config/chamberlain.yaml":      calmThresholds,
		"config/envoy.yaml":            "slack:\n  default_channel: ops\nintervals:\n  outbound_seconds: 1\n",
		"config/generals/gen-ops.yaml": "name: gen-ops\ndescription: operator test general\ntimeout_seconds: 300\nmax_concurrent: 1\nsubscribes: [\"ops.*\"]\n",
	})
	k.Start()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-ops")
	return k
}

func (k *Kingdom) opsEvent(id string, hold bool) {
	k.t.Helper()
	p := map[string]any{"n": id}
	if hold {
		p["hold_me"] = true
	}
	k.DropInbox(id, map[string]any{"id": id, "type": "ops.work", "payload": p, "priority": "normal"})
}

// taskOf waits for the task of an event and returns its id.
func (k *Kingdom) taskOf(ev string) string {
	k.t.Helper()
	var id string
	k.Eventually("a task for "+ev, 180*time.Second, func() bool {
		if tk := k.TaskForEvent(ev); tk != nil {
			id = tk.ID
			return true
		}
		return false
	})
	return id
}

func (k *Kingdom) childPID(task string) int {
	k.t.Helper()
	var pid int
	k.Eventually("the soldier of "+task+" to start its child", 180*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(k.L.Base, "child-"+task+".pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return pid
}

func (k *Kingdom) taskState(id string) string {
	st, _ := k.Tasks.Find(id)
	return st
}

func (k *Kingdom) waitTask(id, state string) *doc.Task {
	k.t.Helper()
	k.Eventually(id+" in "+state, 180*time.Second, func() bool { return k.taskState(id) == state })
	for _, t := range k.TaskList(state) {
		if t.ID == id {
			return &t
		}
	}
	k.t.Fatalf("task %s vanished from %s", id, state)
	return nil
}

// `start pause`: a new inbox event stays pending while the running soldier
// finishes; `start resume`: it runs.
func TestOperator_PauseHoldsNewWorkWhileRunningSoldiersFinish(t *testing.T) {
	k := newOperatorKingdom(t, 3)
	k.opsEvent("evt-ops-a", true)
	a := k.taskOf("evt-ops-a")
	k.childPID(a)

	out, code := k.runBin("start", "pause")
	if code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("start pause: exit %d\n%s", code, out)
	}
	k.opsEvent("evt-ops-b", false)
	k.Eventually("evt-ops-b queued", 30*time.Second, func() bool { return k.Events.Exists(layout.Pending, "evt-ops-b") })
	os.WriteFile(filepath.Join(k.L.Base, "release-"+a), nil, 0o600)
	k.waitTask(a, layout.Completed)
	if r := k.Result(a); r == nil || r.Status != doc.ResultSuccess {
		t.Fatalf("the running soldier did not finish: %+v", r)
	}
	// The king ticked for a's result after the pause: b is still waiting.
	if !k.Events.Exists(layout.Pending, "evt-ops-b") || k.TaskForEvent("evt-ops-b") != nil {
		t.Fatal("an event was admitted while paused")
	}
	out, _ = k.runBin("start", "status")
	if !strings.Contains(out, "PAUSED since") {
		t.Errorf("start status does not show the pause:\n%s", out)
	}

	if out, code := k.runBin("start", "resume"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("start resume: exit %d\n%s", code, out)
	}
	b := k.taskOf("evt-ops-b")
	k.waitTask(b, layout.Completed)
	out, code = k.runBin("start", "tasks")
	if code != 0 || !strings.Contains(out, a) || !strings.Contains(out, b) || !strings.Contains(out, "gen-ops") {
		t.Fatalf("start tasks: exit %d\n%s", code, out)
	}
}

// `start task cancel` on a pending and on a running task: ⛔ in the thread,
// failed/Cancelled, no retry, the slot freed; the running soldier's child
// process is gone too.
func TestOperator_CancelPendingAndRunningTasks(t *testing.T) {
	k := newOperatorKingdom(t, 2)
	k.opsEvent("evt-ops-c", true)
	c := k.taskOf("evt-ops-c")
	child := k.childPID(c)
	k.opsEvent("evt-ops-e", false)
	e := k.taskOf("evt-ops-e") // pending: gen-ops runs one at a time
	k.opsEvent("evt-ops-f", false)
	k.Eventually("evt-ops-f queued", 30*time.Second, func() bool { return k.Events.Exists(layout.Pending, "evt-ops-f") })
	if st := k.taskState(e); st != layout.Pending {
		t.Fatalf("task %s is %s, want pending", e, st)
	}
	if k.TaskForEvent("evt-ops-f") != nil {
		t.Fatal("evt-ops-f dispatched beyond max_soldiers")
	}

	out, code := k.runBin("start", "task", "cancel", e)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel pending: exit %d\n%s", code, out)
	}
	te := k.waitTask(e, layout.Completed)
	if te.Status != doc.ResultFailed {
		t.Errorf("cancelled pending task status %q", te.Status)
	}
	f := k.taskOf("evt-ops-f") // the slot it held is free

	out, code = k.runBin("start", "task", "cancel", c)
	if code != 0 || !strings.Contains(out, "soldier") {
		t.Fatalf("cancel running: exit %d\n%s", code, out)
	}
	k.Eventually("the soldier's child process to die", 30*time.Second, func() bool { return !proctree.Alive(child) })
	k.waitTask(c, layout.Completed)
	if r := k.Result(c); r == nil || r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonCancelled {
		t.Fatalf("running task's final result %+v", r)
	}
	k.waitTask(f, layout.Completed) // gen-ops is free again

	for _, id := range []string{c, e} {
		var m *doc.Message
		k.Eventually("⛔ for "+id, 30*time.Second, func() bool {
			for _, mm := range k.Messages(layout.Sent) {
				if mm.ID == "msg-"+id+"-failed" {
					m = &mm
					return true
				}
			}
			return false
		})
		if !strings.HasPrefix(m.Content, "⛔") {
			t.Errorf("%s final message %q", id, m.Content)
		}
	}
	for _, ev := range k.InternalEvents() {
		if ev.Type == "task.retry_scheduled" {
			t.Errorf("a cancelled task was retried: %s", ev.Data)
		}
	}
	out, _ = k.runBin("start", "tasks", "--json")
	if !strings.Contains(out, `"error_reason": "Cancelled"`) {
		t.Errorf("start tasks --json does not show the cancel:\n%s", out)
	}
}
