package soldier

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// taskProcs lists the live processes whose environment names task under
// base: what a soldier's engine started, however detached.
func taskProcs(base, task string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		vars := bytes.Split(env, []byte{0})
		has := func(s string) bool {
			for _, v := range vars {
				if string(v) == s {
					return true
				}
			}
			return false
		}
		if has(layout.EnvBase+"="+base) && has(EnvTaskID+"="+task) {
			out = append(out, pid)
		}
	}
	return out
}

// assertNoTaskProcs fails if a process of task outlives its soldier.
func assertNoTaskProcs(t *testing.T, base, task string) {
	t.Helper()
	// A SIGKILLed process keeps its environment until the kernel tears
	// it down; give that a moment.
	for deadline := time.Now().Add(60 * time.Second); ; {
		left := taskProcs(base, task)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				if pr, err := os.FindProcess(p); err == nil {
					_ = pr.Kill()
				}
			}
			t.Fatalf("processes %v of %s outlived their soldier", left, task)
		}
		time.Sleep(20 * time.Millisecond) // the kernel reaps asynchronously
	}
}

// claudeWithBash lets the real claude run any Bash command (as root it
// refuses bypassPermissions).
func claudeWithBash(r *realRig) {
	r.sys.Runtime.Claude.Args = []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash"}
}

// An agent that detaches a process (`setsid … &`, reparented to init, in a
// session of its own) and then finishes leaves nothing running: the
// soldier's end sweeps every process carrying the task's variables.
func TestRealClaude_DetachedProcessEndsWithTheSoldier(t *testing.T) {
	r := newRealRig(t, "claude")
	claudeWithBash(r)
	r.fake.Script("SCEN-detach", modelfake.Turns(
		modelfake.Shell("setsid sleep 300 >/dev/null 2>&1 &"),
		so(map[string]any{"status": "success", "summary": "started a server"}),
	))
	task := "task-20260101-041"
	out := r.run(task, "SCEN-detach review", t.TempDir(), "")
	if out.Raw["status"] != "success" {
		t.Fatalf("raw %v", out.Raw)
	}
	if res := r.fake.Requests("SCEN-detach"); len(res) < 2 || len(res[1].ToolResults) == 0 {
		t.Fatalf("the Bash call never ran: %+v", res)
	}
	assertNoTaskProcs(t, r.base, task)
	// The price table prices a finished run exactly as the CLI did.
	u, _ := out.Raw["usage"].(*doc.Usage)
	if c := engine.ClaudeCost("claude-opus-5-5", u); c == nil || out.Raw["cost_usd"] != *c {
		t.Errorf("table prices %v at %v, the CLI at %v", u, c, out.Raw["cost_usd"])
	}
}

// A claude attempt stopped mid-run (here its context; a stop signal takes
// the same path) still records what the engine reported: the streamed
// assistant messages' usage, each message once, priced; and what the
// agent detached dies with it.
func TestRealClaude_StoppedAttemptKeepsItsUsageAndLeavesNothing(t *testing.T) {
	r := newRealRig(t, "claude")
	claudeWithBash(r)
	r.fake.Script("SCEN-stop", modelfake.Turns(
		modelfake.Reply{Text: "starting", ToolName: "shell", ToolInput: map[string]any{"command": "setsid sleep 300 >/dev/null 2>&1 &"},
			InputTokens: 13787, OutputTokens: 300, CacheRead: 2000, CacheCreation: 500},
		modelfake.Reply{ToolName: "shell", ToolInput: map[string]any{"command": "sleep 300"}, InputTokens: 1000},
		so(map[string]any{"status": "success", "summary": "never reached"}),
	))
	task := "task-20260101-042"
	l := layout.New(r.base)
	p := filepath.Join(r.base, task+".md")
	os.WriteFile(p, []byte("SCEN-stop review"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Stop once the second turn's usage is recorded (the agent then
		// sits in `sleep 300`).
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
			if sp, ok := engine.ReadSpent(l.ResultSpent(task)); ok && sp.Usage.InputTokens >= 14787 {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling a real CLI's progress
		}
		cancel()
	}()
	out, err := Run(ctx, RunOptions{Params: spawn.Params{BaseDir: r.base, TaskID: task, General: "gen-x",
		PromptFile: p, Workdir: t.TempDir(), SoldierID: "soldier-1-042"}, System: r.sys, Environ: r.env})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v, want interrupted", err)
	}
	want := doc.Usage{InputTokens: 13787 + 1000, OutputTokens: 1 + 1, CacheReadInputTokens: 2000, CacheCreationInputTokens: 500}
	sp, ok := engine.ReadSpent(l.ResultSpent(task))
	if !ok || *sp.Usage != want {
		t.Fatalf("recorded usage %+v, want %+v (each message once)", sp.Usage, want)
	}
	if c := engine.ClaudeCost("claude-opus-5-5", &want); sp.CostUSD == nil || c == nil || *sp.CostUSD != *c || *c <= 0 {
		t.Fatalf("recorded cost %v, want %v", sp.CostUSD, c)
	}
	if out.Engine == nil || out.Engine.Usage == nil || *out.Engine.Usage != want {
		t.Fatalf("outcome usage %+v", out.Engine)
	}
	assertNoTaskProcs(t, r.base, task)
}

// A command engine that detaches a child and ends normally: the child is
// swept when the soldier ends.
func TestRun_CommandEngineDetachedChildIsSwept(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCommand
	script := `setsid sleep 300 >/dev/null 2>&1 & printf '{"task_id":"%s","status":"success","summary":"ok"}' "$2" > "$1"`
	sys.Runtime.Command.Argv = []string{"/bin/sh", "-c", script, "sh", "{result_path}", "{task_id}"}
	task := "task-20261121-043"
	out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: t.TempDir(), SoldierID: "soldier-1-ac"}, System: sys, Environ: os.Environ()})
	if err != nil || out.Raw["status"] != "success" {
		t.Fatalf("err %v, raw %v", err, out)
	}
	assertNoTaskProcs(t, base, task)
}
