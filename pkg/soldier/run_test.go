package soldier

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// An agent that starts a background process (a dev server) which keeps its
// stdout open must not hang the soldier: the result is published, and the
// leftover process is killed with the engine's group.
func TestRun_BackgroundChildHoldingStdoutDoesNotHang(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	work := t.TempDir()
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCommand
	// The script is a constant; the task's values arrive as argv words.
	script := `sleep 300 & echo $! > "$3/bgpid"; printf '{"task_id":"%s","status":"success","summary":"ok"}' "$2" > "$1"; echo '{"type":"result"}'; exit 0`
	sys.Runtime.Command.Argv = []string{"/bin/sh", "-c", script, "sh", "{result_path}", "{task_id}", "{workdir}"}
	done := make(chan *Outcome, 1)
	go func() {
		out, err := Run(context.Background(), RunOptions{Params: Params{BaseDir: base, TaskID: "task-20261121-001", General: "gen-x",
			PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-aa"}, System: sys, Environ: os.Environ()})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	var out *Outcome
	select {
	case out = <-done:
	case <-time.After(60 * time.Second): // a guard against the old hang (300 s), not a speed assertion
		t.Fatal("soldier hung on an engine's background child")
	}
	if out == nil || out.Raw["status"] != "success" {
		t.Fatalf("outcome %+v, want the agent's success", out)
	}
	b, _ := os.ReadFile(filepath.Join(work, "bgpid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatal("background pid not recorded")
	}
	gone := func() bool {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	}
	for deadline := time.Now().Add(5 * time.Second); !gone() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // the kernel delivers the group kill
	}
	if !gone() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("background child %d outlived its soldier", pid)
	}
	if _, err := os.Stat(l.ResultRaw("task-20261121-001")); err != nil {
		t.Fatalf("raw result not published: %v", err)
	}
}

// An agent's staging result that breaks the raw-result schema is not
// published as it is (the general would reject it and lose the attempt's
// usage): the soldier publishes a failed InvalidResult naming the file and
// the broken rule. An engine silent on stderr leaves no empty .err log.
func TestRun_InvalidStagingResultIsInvalidResultAndNoEmptyErrLog(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	work := t.TempDir()
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCommand
	// The script is a constant; the task's values arrive as argv words.
	script := `printf '{"task_id":"%s","status":"done","summary":"ok","Status":"success"}' "$2" > "$1"; echo '{"type":"result"}'`
	sys.Runtime.Command.Argv = []string{"/bin/sh", "-c", script, "sh", "{result_path}", "{task_id}"}
	const task = "task-20261121-002"
	out, err := Run(context.Background(), RunOptions{Params: Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-bb"}, System: sys, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := out.Raw["error"].(string)
	if out.Raw["status"] != "failed" || out.Raw["error_reason"] != "InvalidResult" ||
		!strings.Contains(msg, "agent result") || !strings.Contains(msg, "at '/status'") {
		t.Fatalf("raw = %v, want failed InvalidResult naming the staging file and /status", out.Raw)
	}
	b, err := os.ReadFile(l.ResultRaw(task))
	if err != nil || !strings.Contains(string(b), `"InvalidResult"`) {
		t.Fatalf("published raw result: %s (%v)", b, err)
	}
	if _, err := os.Stat(l.SessionLog("soldier-1-bb")); err != nil {
		t.Errorf("stdout log: %v", err)
	}
	if _, err := os.Stat(l.SessionErr("soldier-1-bb")); err == nil {
		t.Error("an engine silent on stderr left a .err log")
	}
}
