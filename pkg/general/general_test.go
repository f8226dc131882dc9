package general

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func TestGeneral_SuccessRunsClaudeAndWritesFinalResult(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success", "session_id": "5e55a0b1-0000-4000-8000-00000000abcd", "memory_updates": []string{"prefer small PRs"}})
	e.start()
	payload := map[string]any{"text": "hi {{task_id}} $(touch /tmp/kingdom-pwned) `id` {{payload.text}}", "nested": map[string]any{"k": "v"}}
	e.task("task-20260101-001", func(t *doc.Task) { t.Payload = payload; t.RetryCount = 0 })
	os.WriteFile(e.l.Template(e.m.Name), []byte("Task {{task_id}} type {{type}}\nText: {{payload.text}}\nNested: {{payload.nested.k}}\nMissing: [{{payload.nope.x}}]\n"), 0o600)

	r := e.final("task-20260101-001")
	if r.Status != "success" || r.General != "gen-test" || r.RetryCount != 0 || r.SessionID != "5e55a0b1-0000-4000-8000-00000000abcd" {
		t.Fatalf("final = %+v", r)
	}
	if !strings.HasPrefix(r.SoldierID, "soldier-") || r.CompletedAt == "" {
		t.Errorf("final lacks soldier/completed_at: %+v", r)
	}
	c := e.call("task-20260101-001")
	wantPrompt := "Task task-20260101-001 type test.run\nText: " + payload["text"].(string) + "\nNested: v\nMissing: []\n"
	if !strings.HasPrefix(c.Prompt, wantPrompt) {
		t.Errorf("prompt = %q\nwant prefix %q", c.Prompt, wantPrompt)
	}
	if _, err := os.Stat("/tmp/kingdom-pwned"); err == nil {
		t.Error("payload text was executed")
	}
	if c.SlackTokenVisible {
		t.Error("the engine saw SLACK_BOT_TOKEN")
	}
	// SPEC §10.1, §10.5: a soldier-chosen session id and the result schema.
	if got := strings.Join(c.Args, " "); !strings.HasPrefix(got, "-p --output-format stream-json --verbose --session-id ") || !strings.Contains(got, " --json-schema {") {
		t.Errorf("args = %q", got)
	}
	// The task stays in in_progress (only the king moves it, §9.4).
	if _, err := os.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.InProgress), "task-20260101-001.json")); err != nil {
		t.Errorf("task left in_progress: %v", err)
	}
	if es, _ := sessions.New(e.l).List(); len(es) != 0 {
		t.Errorf("sessions.json still lists %v", es)
	}
	if _, err := os.Stat(e.l.TaskDir(e.m.Name, "task-20260101-001")); err == nil {
		t.Error("task dir not removed after the final result")
	}
	if got := readTrim(e.l.ResultSessionID("task-20260101-001")); got != "5e55a0b1-0000-4000-8000-00000000abcd" {
		t.Errorf("session-id file = %q", got)
	}
	mem, _ := os.ReadFile(filepath.Join(e.l.MemoryGeneral(e.m.Name), "learned-patterns.md"))
	if !strings.Contains(string(mem), "prefer small PRs") {
		t.Errorf("memory = %q", mem)
	}
	for _, typ := range []string{"task.started", "soldier.spawned", "soldier.completed"} {
		if len(e.events(typ)) != 1 {
			t.Errorf("%s emitted %d times", typ, len(e.events(typ)))
		}
	}
	if d := e.events("soldier.completed")[0]; d["status"] != "success" || d["task_id"] != "task-20260101-001" {
		t.Errorf("soldier.completed = %v", d)
	}
	if len(e.events("task.completed")) != 0 {
		t.Error("the general must not emit task.completed (§9.7)")
	}
}

// A soldier ends its own session when it exits after publishing: the
// general sees that in /proc and asks tmux nothing more than to start it.
// One that does not end in time is killed through tmux.
func TestGeneral_SoldierThatEndsByItselfIsNotKilledThroughTmux(t *testing.T) {
	e := newEnv(t)
	calls := filepath.Join(e.l.Base, "tmux-calls")
	shim := filepath.Join(e.l.Base, "tmux-shim")
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	// $1 $2 are -L <socket>; $3 is the tmux command.
	os.WriteFile(shim, []byte("#!/bin/sh\necho \"$3\" >> "+calls+"\nexec "+real+" \"$@\"\n"), 0o700)
	e.tm = &tmux.Client{Bin: shim, Socket: tmuxC.Socket}
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	for _, id := range []string{"task-20260101-001", "task-20260101-002"} {
		e.task(id)
		if r := e.final(id); r.Status != "success" {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	b, _ := os.ReadFile(calls)
	// Only the two new-sessions; a new-session that met the shared server
	// while it exited (the last test's last session just ended) is retried
	// after a has-session (tmux.Client.Start): that pair is not a question
	// about a soldier.
	got := strings.Fields(string(b))
	var spawns []string
	for i := 0; i < len(got); i++ {
		if got[i] == "new-session" && i+2 < len(got) && got[i+1] == "has-session" && got[i+2] == "new-session" {
			i++ // the failed attempt and its check: the retry follows
			continue
		}
		spawns = append(spawns, got[i])
	}
	if strings.Join(spawns, " ") != "new-session new-session" {
		t.Errorf("tmux calls = %v, want only the two new-sessions", got)
	}
	if es, _ := sessions.New(e.l).List(); len(es) != 0 {
		t.Errorf("sessions.json still lists %v", es)
	}
	if ss := e.soldierSessions(); len(ss) != 0 {
		t.Errorf("sessions left: %v", ss)
	}

	// A process that does not end is waited for only briefly.
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	proc, ok := proctree.Identify(sleeper.Process.Pid)
	if !ok {
		t.Fatal("cannot identify a live process")
	}
	if e.g.awaitExit(proc) {
		t.Error("a live process was taken for ended")
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	if !e.g.awaitExit(proc) {
		t.Error("an ended process was taken for live")
	}
	if e.g.awaitExit(proctree.Identity{}) {
		t.Error("an unknown process was taken for ended")
	}
}

func TestGeneral_FailureScenarios(t *testing.T) {
	cases := []struct {
		mode, status, reason, errHas string
	}{
		{"exit3", "failed", doc.ReasonEngineError, "code 3"},
		{"garbage", "failed", doc.ReasonInvalidResult, "result"},
		{"fail", "failed", doc.ReasonAgentFailed, "tests broken"},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			e := newEnv(t)
			e.scenario("", map[string]any{"mode": tc.mode})
			e.start()
			e.task("task-20260101-002")
			r := e.final("task-20260101-002")
			if r.Status != tc.status || r.ErrorReason != tc.reason || !strings.Contains(r.Error, tc.errHas) {
				t.Fatalf("final = status %s reason %s error %q; want %s %s ~%q", r.Status, r.ErrorReason, r.Error, tc.status, tc.reason, tc.errHas)
			}
		})
	}
}

func TestGeneral_EngineMissing(t *testing.T) {
	e := newEnv(t)
	e.sys.Runtime.Claude.Command = filepath.Join(t.TempDir(), "no-claude-here")
	e.start()
	e.task("task-20260101-003")
	r := e.final("task-20260101-003")
	if r.Status != "failed" || r.ErrorReason != doc.ReasonEngineMissing {
		t.Fatalf("final = %+v", r)
	}
}

func TestGeneral_ResumeWithoutItsWorkdirIsSessionLost(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.task("task-20260101-020", func(t *doc.Task) {
		t.Type = doc.TaskTypeResume
		t.SessionID = "5e55a0b1-0000-4000-8000-000000000002"
		t.Workdir = filepath.Join(e.l.TaskDir(e.m.Name, "task-20260101-019"), "repo") // never made, or cleaned
		t.OriginalTaskID = "task-20260101-019"
	})
	r := e.final("task-20260101-020")
	if r.Status != "failed" || r.ErrorReason != doc.ReasonSessionLost || !strings.Contains(r.Error, "is gone") {
		t.Fatalf("final = %+v", r)
	}
	if _, err := os.Stat(e.l.TaskDir(e.m.Name, "task-20260101-020")); err == nil {
		t.Error("a fresh task dir was made for a resume that cannot run")
	}
}

func TestGeneral_NeedsHumanKeepsWorkdirAndResumePassesSession(t *testing.T) {
	e := newEnv(t)
	e.scenario("task-20260101-010", map[string]any{"mode": "needs_human", "session_id": "5e55a0b1-0000-4000-8000-000000000001"})
	e.start()
	e.task("task-20260101-010", func(t *doc.Task) {
		t.Payload = map[string]any{"channel": "D1", "ts": "1700000000.000100", "text": "help"}
	})
	r := e.final("task-20260101-010")
	if r.Status != "needs_human" || r.CheckpointPath == "" || r.Question != "Which branch?" {
		t.Fatalf("final = %+v", r)
	}
	b, err := os.ReadFile(r.CheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := schema.DecodeCheckpoint(b)
	if err != nil {
		t.Fatalf("checkpoint invalid: %v\n%s", err, b)
	}
	if cp.SessionID != "5e55a0b1-0000-4000-8000-000000000001" || cp.Thread == nil || cp.Thread.Channel != "D1" || cp.Thread.ThreadTS != "1700000000.000100" {
		t.Errorf("checkpoint = %+v", cp)
	}
	if st, err := os.Stat(cp.Workdir); err != nil || !st.IsDir() {
		t.Fatalf("workdir %s not kept: %v", cp.Workdir, err)
	}
	// The king's resume task carries session and workdir (§9.8).
	e.scenario("task-20260101-011", map[string]any{"mode": "success"})
	e.task("task-20260101-011", func(t *doc.Task) {
		t.Type = doc.TaskTypeResume
		t.Priority = "high"
		t.SessionID = cp.SessionID
		t.Workdir = cp.Workdir
		t.OriginalTaskID = "task-20260101-010"
		t.Thread = cp.Thread
	})
	r2 := e.final("task-20260101-011")
	if r2.Status != "success" {
		t.Fatalf("resume final = %+v", r2)
	}
	c := e.call("task-20260101-011")
	if c.Resume != "5e55a0b1-0000-4000-8000-000000000001" || !contains(c.Args, "--resume") {
		t.Errorf("resume call args = %q", c.Args)
	}
	if c.Cwd != cp.Workdir {
		t.Errorf("resume ran in %s, want %s", c.Cwd, cp.Workdir)
	}
	if _, err := os.Stat(cp.Workdir); err == nil {
		t.Error("the original task dir should be removed at the resume's end")
	}
}

func contains(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

func TestGeneral_KilledFromOutsideIsSoldierDied(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "hang"})
	e.start()
	e.task("task-20260101-020")
	e.tickUntil("soldier session", func() bool { return sessionOf(e, "task-20260101-020") != "" })
	sid := sessionOf(e, "task-20260101-020")
	// The engine is the runner's child (pane process → soldier-spawn run →
	// claude), in its own process group.
	var engine int
	e.tickUntil("engine process", func() bool {
		pane, err := tmuxC.PanePID(context.Background(), sid)
		if err != nil {
			return false
		}
		// Children are listed per thread: the fork may come from any of
		// the runner's threads.
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pane))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if fs := strings.Fields(string(b)); len(fs) > 0 {
				engine, _ = strconv.Atoi(fs[0])
			}
		}
		return engine > 0
	})
	if err := tmuxC.Kill(context.Background(), sid); err != nil {
		t.Fatal(err)
	}
	r := e.final("task-20260101-020")
	if r.Status != "killed" || r.ErrorReason != doc.ReasonSoldierDied {
		t.Fatalf("final = %+v", r)
	}
	if len(e.events("soldier.killed")) != 1 {
		t.Error("soldier.killed not emitted")
	}
	// Killing the session must take the agent down too, not orphan it.
	e.tickUntil("engine process to die", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", engine))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}

// advanceUntilFinal drives a fake clock in 10 s steps until the final result.
// alive, when not nil, names the soldier's sign of life (a file's mtime that
// changes while it works): each step then waits for a change of it before the
// clock moves, so a soldier starved of CPU (a loaded machine) is not taken
// for a silent one.
func advanceUntilFinal(e *env, fc *clock.Fake, id string, alive func() string) *doc.Result {
	e.t.Helper()
	e.tickUntil("soldier session", func() bool { return sessionOf(e, id) != "" })
	count := func() int { return e.pollCount(id) }
	last := ""
	if alive != nil {
		last = alive()
	}
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(e.l.ResultFinal(id)); err == nil {
			break
		}
		// A soldier that shows life shows it in every step (until its raw
		// result ends the watch).
		for deadline := time.Now().Add(30 * time.Second); alive != nil && alive() == last && time.Now().Before(deadline); {
			if _, err := os.Stat(e.l.ResultRaw(id)); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond) // waiting on the soldier's processes
		}
		if alive != nil {
			last = alive()
		}
		// Step the clock only after the watcher has looked at the current
		// time twice (so it saw every heartbeat of this step): the
		// measured durations then do not depend on scheduling.
		seen := count()
		for deadline := time.Now().Add(30 * time.Second); count() < seen+2 && time.Now().Before(deadline); {
			if _, err := os.Stat(e.l.ResultFinal(id)); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond) // waiting on the watcher goroutine
		}
		fc.Advance(10 * time.Second)
	}
	return e.final(id)
}

// mtimeOf is a sign of life for advanceUntilFinal: path's mtime ("" while
// it is missing).
func mtimeOf(path string) func() string {
	return func() string {
		st, err := os.Stat(path)
		if err != nil {
			return ""
		}
		return st.ModTime().String()
	}
}

func TestGeneral_TimeoutWithoutHeartbeat(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	e.scenario("", map[string]any{"mode": "hang"})
	e.start()
	e.task("task-20260101-030")
	r := advanceUntilFinal(e, fc, "task-20260101-030", nil)
	if r.Status != "failed" || r.ErrorReason != doc.ReasonTimeout {
		t.Fatalf("final = %+v", r)
	}
	if r.DurationSeconds < 100 || r.DurationSeconds >= 200 {
		t.Errorf("duration %.0f s: a silent soldier should time out at ~timeout (100 s), without extension", r.DurationSeconds)
	}
	if len(e.events("soldier.timeout")) != 1 {
		t.Error("soldier.timeout not emitted")
	}
	if len(e.soldierSessions()) != 0 {
		t.Errorf("session not killed: %v", e.soldierSessions())
	}
}

func TestGeneral_TimeoutExtendedByHeartbeatUpToTwice(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	e.scenario("", map[string]any{"mode": "hang_heartbeat"})
	e.start()
	e.task("task-20260101-031")
	r := advanceUntilFinal(e, fc, "task-20260101-031", mtimeOf(e.l.ResultHeartbeat("task-20260101-031")))
	if r.Status != "failed" || r.ErrorReason != doc.ReasonTimeout {
		t.Fatalf("final = %+v", r)
	}
	if r.DurationSeconds < 200 || r.DurationSeconds > 230 {
		t.Errorf("duration %.0f s: a soldier with a fresh heartbeat runs until 2× timeout (200 s)", r.DurationSeconds)
	}
}

func TestGeneral_MaxConcurrentThreeRunAtOnce(t *testing.T) {
	e := newEnv(t)
	e.m.MaxConcurrent = 3
	e.scenario("", map[string]any{"mode": "success", "sleep_ms": 1500})
	e.start()
	for i := 1; i <= 4; i++ {
		e.task("task-20260101-04" + string(rune('0'+i)))
	}
	peak := 0
	e.tickUntil("all four finished", func() bool {
		if n := len(e.soldierSessions()); n > peak {
			peak = n
		}
		for i := 1; i <= 4; i++ {
			if _, err := os.Stat(e.l.ResultFinal("task-20260101-04" + string(rune('0'+i)))); err != nil {
				return false
			}
		}
		return true
	})
	if peak != 3 {
		t.Fatalf("peak soldier sessions = %d, want 3", peak)
	}
}

func TestGeneral_PromptTooLargeFailsWithoutSoldier(t *testing.T) {
	e := newEnv(t)
	dir := e.l.MemoryGeneral("gen-test")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "huge.md"), []byte(strings.Repeat("m", MaxPromptBytes)), 0o600)
	e.start()
	e.task("task-20260101-050")
	r := e.final("task-20260101-050")
	if r.Status != "failed" || r.ErrorReason != doc.ReasonPromptTooLarge {
		t.Fatalf("final = %+v", r)
	}
	if len(e.events("soldier.spawned")) != 0 {
		t.Error("a soldier was spawned for a refused prompt")
	}
}

func TestGeneral_SkipsOthersTasksAndFutureNotBefore(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.task("task-20260101-060", func(t *doc.Task) { t.TargetGeneral = "gen-other" })
	e.task("task-20260101-061", func(t *doc.Task) { t.NotBefore = doc.FormatTime(time.Now().Add(time.Hour)) })
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"task-20260101-060", "task-20260101-061"} {
		if _, err := os.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.Pending), id+".json")); err != nil {
			t.Errorf("%s should stay pending: %v", id, err)
		}
	}
}

// A task left in in_progress/ with a raw result but no final result while
// the general keeps running (its final write failed, e.g. a full disk) is
// finished by the periodic reconcile pass, not only after a restart; a task
// the king is re-queueing (status retrying) is left alone.
func TestGeneral_PeriodicReconcileFinishesAStrandedTask(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	g := e.start()
	if err := g.Tick(context.Background()); err != nil { // the start-up pass
		t.Fatal(err)
	}
	put := func(id, status string) {
		e.claimed(id, func(tk *doc.Task) { tk.Status = status })
		os.WriteFile(e.l.ResultRaw(id), []byte(`{"task_id":"`+id+`","status":"success","summary":"done before the crash"}`), 0o600)
	}
	put("task-20260101-090", doc.TaskInProgress)
	put("task-20260101-091", doc.TaskRetrying)
	g.Tick(context.Background())
	if _, err := os.Stat(e.l.ResultFinal("task-20260101-090")); err == nil {
		t.Fatal("reconciled before the period elapsed")
	}
	fc.Advance(reconcileEvery)
	renewLease(t, e, fc.Now()) // start renewed the host lease meanwhile
	g.Tick(context.Background())
	if r := e.final("task-20260101-090"); r.Status != "success" {
		t.Fatalf("final = %+v", r)
	}
	g.Wait()
	if _, err := os.Stat(e.l.ResultFinal("task-20260101-091")); err == nil {
		t.Fatal("a task the king is re-queueing was finished by the general")
	}
}
