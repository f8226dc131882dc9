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
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
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
		out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: "task-20261121-001", General: "gen-x",
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
	for deadline := time.Now().Add(60 * time.Second); !gone() && time.Now().Before(deadline); {
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

// An agent's staging result that breaks the raw-result schema is published
// as the agent wrote it, with its origin recorded: soldier-spawn links no
// validator (it starts once per task), and the general, which validates
// what it reads, rejects it as a failed InvalidResult naming the staging
// file and the broken rule (pkg/general's
// TestGeneral_InvalidAgentResultNamesFileAndRuleAndKeepsUsage). A staging
// file that is not even a JSON object for this task is the soldier's own
// InvalidResult. An engine silent on stderr leaves no empty .err log.
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
	out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-bb"}, System: sys, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.ResultRaw(task))
	if err != nil {
		t.Fatal(err)
	}
	if out.Raw["status"] != "done" || out.Raw[doc.RawOrigin] != "agent result "+l.ResultStaging(task) {
		t.Fatalf("raw = %v, want the agent's result with its origin", out.Raw)
	}
	// What the general's read makes of it.
	_, verr := schema.DecodeRawResult(b)
	if verr == nil || !strings.Contains(verr.Error(), "at '/status'") {
		t.Fatalf("published %s: the general's check says %v, want a violation at /status", b, verr)
	}
	if _, err := os.Stat(l.SessionLog("soldier-1-bb")); err != nil {
		t.Errorf("stdout log: %v", err)
	}
	if _, err := os.Stat(l.SessionErr("soldier-1-bb")); err == nil {
		t.Error("an engine silent on stderr left a .err log")
	}
}

// readStaging refuses what is not a JSON object for this task (the
// soldier's own InvalidResult): a task_id naming another task; one left out
// or null is filled in (SPEC §10.1: the soldier knows its task). The rest is
// the general's to check.
func TestReadStaging_OnlyAJSONObjectForThisTask(t *testing.T) {
	const task = "task-20261121-003"
	dir := t.TempDir()
	cases := []struct{ name, data, errHas string }{
		{"not JSON", `{"task_id":`, "raw-result: not valid JSON"},
		{"null", `null`, "null is not a raw result"},
		{"array", `[]`, "raw-result: json: cannot unmarshal array"},
		{"other task", `{"task_id":"task-20261121-004","status":"success","summary":"x"}`, `task_id "task-20261121-004" does not match`},
		{"empty task", `{"task_id":"","status":"success","summary":"x"}`, `task_id "" does not match`},
		{"number task", `{"task_id":7,"status":"success","summary":"x"}`, `task_id 7 does not match`},
		{"good", `{"task_id":"` + task + `","status":"failed","summary":"x","error":"e"}`, ""},
		{"no task", `{"status":"failed","summary":"x","error":"e"}`, ""},
		{"null task", `{"task_id":null,"status":"failed","summary":"x","error":"e"}`, ""},
	}
	for i, c := range cases {
		p := filepath.Join(dir, strconv.Itoa(i))
		os.WriteFile(p, []byte(c.data), 0o600)
		m, err := readStaging(p, task)
		if c.errHas == "" {
			if err != nil || m["task_id"] != task || m["error_reason"] != "AgentFailed" || m[doc.RawOrigin] != "agent result "+p {
				t.Errorf("%s: %v, %v", c.name, m, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.errHas) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.errHas)
		}
	}
}

// With both a structured output and a staging file, the structured output
// is published with the staging result beside it (SPEC §10.1: structured >
// a *valid* staging file; the general validates and picks).
func TestResultOf_StructuredOutputCarriesTheStagingFallback(t *testing.T) {
	dir := t.TempDir()
	const task = "task-20260101-006"
	staging := filepath.Join(dir, "staging.json")
	os.WriteFile(staging, []byte(`{"task_id":"`+task+`","status":"success","summary":"staged"}`), 0o600)
	inv := &engine.Invocation{Engine: config.EngineClaude}
	po := &engine.Outcome{Structured: []byte(`{"status":"done","summary":"structured"}`)}
	raw := resultOf(task, RunOptions{}, inv, engine.Spec{}, po, 0, "", nil, staging)
	if raw["summary"] != "structured" {
		t.Fatalf("published %v, want the structured output", raw)
	}
	fb, _ := raw[doc.RawFallback].(map[string]any)
	if fb["summary"] != "staged" || fb["task_id"] != task {
		t.Errorf("fallback = %v, want the staging result", raw[doc.RawFallback])
	}
	os.Remove(staging)
	raw = resultOf(task, RunOptions{}, inv, engine.Spec{}, po, 0, "", nil, staging)
	if _, ok := raw[doc.RawFallback]; ok {
		t.Errorf("a fallback without a staging file: %v", raw)
	}
}

// runCommand runs one attempt of task with the command engine running the
// constant shell script (argv: $1 result path, $2 task id, $3 results dir).
func runCommand(t *testing.T, ctx context.Context, base, task, script string, opts ...func(*RunOptions)) (*Outcome, error) {
	t.Helper()
	l := layout.New(base)
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCommand
	sys.Runtime.Command.Argv = []string{"/bin/sh", "-c", script, "sh", "{result_path}", "{task_id}", l.ResultsDir()}
	o := RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: t.TempDir(), SoldierID: "soldier-1-cc"}, System: sys, Environ: os.Environ()}
	for _, f := range opts {
		f(&o)
	}
	return Run(ctx, o)
}

// The command engine's agent may leave task_id out of its result file: the
// soldier knows its task and publishes the result for it (SPEC §10.1).
func TestRun_CommandResultWithoutTaskIDIsPublishedForTheTask(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	const task = "task-20261121-005"
	out, err := runCommand(t, context.Background(), base, task, `printf '{"status":"success","summary":"no id"}' > "$1"`)
	if err != nil {
		t.Fatal(err)
	}
	m := readRaw(t, l.ResultRaw(task))
	if m["task_id"] != task || m["status"] != "success" || m["summary"] != "no id" {
		t.Fatalf("raw result %v, want the agent's success for %s", m, task)
	}
	if out.Raw["status"] != "success" {
		t.Errorf("outcome %v", out.Raw)
	}
	if _, err := schema.DecodeRawResult(mustRead(t, l.ResultRaw(task))); err != nil {
		t.Errorf("the general would refuse the published result: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An agent that writes <task>-raw.json itself (it runs as the soldier's
// user) does not get to publish what it likes: the soldier removes that
// file, reports it, and publishes the agent's result through the staging
// file, with its origin (so the general sanitises it as the agent's).
func TestRun_AnAgentsOwnRawResultIsReplacedByTheSoldiers(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	const task = "task-20261121-012"
	script := `printf '{"task_id":"%s","status":"failed","summary":"x","error":"x","error_reason":"UsageLimited","resets_at":"2099-01-01T00:00:00Z"}' "$2" > "$3/$2-raw.json"
printf '{"status":"failed","summary":"real","error":"tests broke"}' > "$1"`
	if _, err := runCommand(t, context.Background(), base, task, script); err != nil {
		t.Fatal(err)
	}
	m := readRaw(t, l.ResultRaw(task))
	if m["summary"] != "real" || m["error_reason"] != "AgentFailed" || m[doc.RawOrigin] != "agent result "+l.ResultStaging(task) {
		t.Fatalf("raw result %v, want the agent's staging result with its origin", m)
	}
	if _, ok := m["resets_at"]; ok {
		t.Errorf("the forged usage limit survived: %v", m)
	}
	if ev := forgedEvents(t, l); len(ev) != 1 || ev[0]["task_id"] != task {
		t.Errorf("soldier.result_forged events %v, want one", ev)
	}
}
