package soldier

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// realRig runs soldier.Run against a real CLI (node_modules/.bin) pointed
// at the fake model API, with a private HOME.
type realRig struct {
	t      *testing.T
	fake   *modelfake.Server
	sys    *config.System
	base   string
	home   string
	env    []string
	engine string
	// backoff is RunOptions.RateLimitBackoff (nil: the default).
	backoff []time.Duration
}

func newRealRig(t *testing.T, eng string) *realRig {
	t.Helper()
	bin := modelfake.FindCLI(t, eng)
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	r := &realRig{t: t, fake: fake, base: t.TempDir(), home: t.TempDir(), engine: eng, sys: config.DefaultSystem()}
	layout.New(r.base).Ensure()
	r.sys.Runtime.Engine = eng
	r.sys.Runtime.Claude.Command, r.sys.Runtime.Codex.Command = bin, bin
	r.env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_KEY=sk-fake-openai"}
	for k, v := range fake.ClaudeEnv() {
		r.env = append(r.env, k+"="+v)
		r.sys.Runtime.EnvPassthrough = append(r.sys.Runtime.EnvPassthrough, k)
	}
	os.MkdirAll(filepath.Join(r.home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(r.home, ".codex", "config.toml"), []byte(fake.CodexConfig()), 0o600)
	return r
}

// run runs one attempt of task with the prompt text in workdir.
func (r *realRig) run(task, prompt, workdir, resume string) *Outcome {
	r.t.Helper()
	p := filepath.Join(r.base, task+".md")
	os.WriteFile(p, []byte(prompt), 0o600)
	l := layout.New(r.base)
	os.Remove(l.ResultRaw(task))
	out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: r.base, TaskID: task, General: "gen-x",
		PromptFile: p, Workdir: workdir, SoldierID: "soldier-1-" + task[len(task)-3:], Resume: resume}, System: r.sys, Environ: r.env, RateLimitBackoff: r.backoff})
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := os.ReadFile(l.ResultRaw(task))
	if err != nil {
		r.t.Fatalf("raw result not published: %v", err)
	}
	if _, err := schema.DecodeRawResult(b); err != nil {
		r.t.Fatalf("published raw result invalid: %v\n%s", err, b)
	}
	return out
}

func so(fields map[string]any) modelfake.Reply { return modelfake.Tool("StructuredOutput", fields) }

func TestRealClaude_StructuredResultSessionAndCleanup(t *testing.T) {
	r := newRealRig(t, "claude")
	r.fake.Script("SCEN-ok", modelfake.Turns(so(map[string]any{"status": "success", "summary": "reviewed PR 7"})))
	work := t.TempDir()
	out := r.run("task-20260101-001", "SCEN-ok review", work, "")
	if out.Raw["status"] != "success" || out.Raw["summary"] != "reviewed PR 7" || out.Raw["task_id"] != "task-20260101-001" {
		t.Fatalf("raw %v", out.Raw)
	}
	sid := readTrim(t, layout.New(r.base).ResultSessionID("task-20260101-001"))
	if out.Raw["session_id"] != sid || engine.CheckSessionID("claude", sid) != nil {
		t.Fatalf("session %v, recorded %q", out.Raw["session_id"], sid)
	}
	if u, ok := out.Raw["usage"].(*doc.Usage); !ok || u.InputTokens != 100 || out.Raw["cost_usd"] == nil {
		t.Fatalf("usage %v cost %v", out.Raw["usage"], out.Raw["cost_usd"])
	}
	reqs := r.fake.Requests("SCEN-ok")
	if len(reqs) == 0 || !contains(reqs[0].Tools, "StructuredOutput") {
		t.Fatalf("StructuredOutput tool not offered: %+v", reqs)
	}
	if _, err := os.Stat(engine.ClaudeProjectDir(filepath.Join(r.home, ".claude"), work)); !os.IsNotExist(err) {
		t.Fatalf("claude project dir of a finished task left behind: %v", err)
	}
}

func TestRealClaude_NoResultQuotesLastText(t *testing.T) {
	r := newRealRig(t, "claude")
	r.fake.Script("SCEN-nores", modelfake.Turns(modelfake.Text("I could not find the PR you mean.")))
	out := r.run("task-20260101-002", "SCEN-nores review", t.TempDir(), "")
	if out.Raw["error_reason"] != doc.ReasonNoResult || !strings.Contains(out.Raw["error"].(string), "I could not find the PR you mean.") {
		t.Fatalf("raw %v", out.Raw)
	}
}

func TestRealClaude_APIErrorQuoted(t *testing.T) {
	r := newRealRig(t, "claude")
	r.fake.Script("SCEN-credit", modelfake.Always(modelfake.APIError(400, "invalid_request_error",
		"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")))
	out := r.run("task-20260101-003", "SCEN-credit review", t.TempDir(), "")
	e, _ := out.Raw["error"].(string)
	// An account without credit is refused (terminal), with the fix.
	if out.Raw["error_reason"] != doc.ReasonEngineRefused || !strings.Contains(strings.ToLower(e), "credit balance is too low") ||
		!strings.Contains(e, "400") || !strings.Contains(e, "add credits") {
		t.Fatalf("raw %v", out.Raw)
	}
}

func TestRealClaude_BypassAsRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the bypass refusal happens only as root")
	}
	r := newRealRig(t, "claude")
	r.sys.Runtime.Claude.Args = []string{"--permission-mode", "bypassPermissions"}
	out := r.run("task-20260101-004", "SCEN-none", t.TempDir(), "")
	e, _ := out.Raw["error"].(string)
	if out.Raw["error_reason"] != doc.ReasonEngineRefused || !strings.Contains(e, "root/sudo") || !strings.Contains(e, "acceptEdits") {
		t.Fatalf("raw %v", out.Raw)
	}
}

func TestRealClaude_ResumeSeesEarlierTurnsAndLostSession(t *testing.T) {
	r := newRealRig(t, "claude")
	r.fake.Script("SCEN-ask", modelfake.Turns(
		so(map[string]any{"status": "needs_human", "summary": "need a branch", "question": "Which branch?"}),
		so(map[string]any{"status": "success", "summary": "merged into the answered branch"}),
	))
	work := t.TempDir()
	first := r.run("task-20260101-005", "SCEN-ask do it", work, "")
	if first.Raw["status"] != "needs_human" || first.Raw["question"] != "Which branch?" {
		t.Fatalf("first %v", first.Raw)
	}
	sid := first.SessionID
	if _, err := os.Stat(filepath.Join(engine.ClaudeProjectDir(filepath.Join(r.home, ".claude"), work), sid+".jsonl")); err != nil {
		t.Fatalf("needs_human session not kept: %v", err)
	}
	second := r.run("task-20260101-006", "The human answered: main", work, sid)
	if second.Raw["status"] != "success" || second.SessionID != sid {
		t.Fatalf("second %v (session %s, want %s)", second.Raw, second.SessionID, sid)
	}
	reqs := r.fake.Requests("SCEN-ask")
	last := reqs[len(reqs)-1]
	if last.Turn != 1 || !last.HasText("The human answered: main") || !last.HasText("SCEN-ask do it") {
		t.Fatalf("resumed request does not carry the earlier turns: turn %d texts %q", last.Turn, last.Texts)
	}
	lost := r.run("task-20260101-007", "SCEN-ask again", work, sid)
	if lost.Raw["error_reason"] != doc.ReasonSessionLost {
		t.Fatalf("resume of a removed session: %v", lost.Raw)
	}
	bad := r.run("task-20260101-008", "x", work, "--settings=/tmp/evil.json")
	if bad.Raw["error_reason"] != doc.ReasonSessionLost || !strings.Contains(bad.Raw["error"].(string), "not a UUID") {
		t.Fatalf("malformed resume token: %v", bad.Raw)
	}
}

func TestRealCodex_StructuredResultResumeAndNoResult(t *testing.T) {
	r := newRealRig(t, "codex")
	okJSON, _ := json.Marshal(map[string]any{"status": "needs_human", "summary": "need a branch", "question": "Which branch?",
		"error": nil, "reason": nil, "memory_updates": nil, "notify_channel": nil, "proclamation": nil})
	r.fake.Script("SCEN-cx", modelfake.Turns(
		modelfake.Shell("echo edited > notes.txt && git status --short"),
		modelfake.Text(string(okJSON)),
		modelfake.Text(`{"status":"success","summary":"done on main","error":null,"reason":null,"question":null,"memory_updates":null,"notify_channel":null,"proclamation":null}`),
	))
	work := worktree(t)
	first := r.run("task-20260101-011", "SCEN-cx edit", work, "")
	if first.Raw["status"] != "needs_human" || first.Raw["question"] != "Which branch?" {
		t.Fatalf("first %v", first.Raw)
	}
	if b, err := os.ReadFile(filepath.Join(work, "notes.txt")); err != nil || strings.TrimSpace(string(b)) != "edited" {
		t.Fatalf("the default sandbox did not let the agent write in its cwd: %v %q", err, b)
	}
	// Its git reads the worktree (codex keeps a worktree's git dir
	// read-only under workspace-write: commits need danger-full-access).
	if tr := r.fake.Requests("SCEN-cx")[1].ToolResults; len(tr) == 0 || !strings.Contains(tr[0], "?? notes.txt") {
		t.Fatalf("git status in the worktree: %q", tr)
	}
	if engine.CheckSessionID("codex", first.SessionID) != nil {
		t.Fatalf("thread id %q", first.SessionID)
	}
	if u, ok := first.Raw["usage"].(*doc.Usage); !ok || u.OutputTokens == 0 || first.Raw["cost_usd"] != nil {
		t.Fatalf("usage %v cost %v", first.Raw["usage"], first.Raw["cost_usd"])
	}
	second := r.run("task-20260101-012", "The human answered: main", work, first.SessionID)
	if second.Raw["status"] != "success" || second.SessionID != first.SessionID {
		t.Fatalf("second %v", second.Raw)
	}
	reqs := r.fake.Requests("SCEN-cx")
	last := reqs[len(reqs)-1]
	if !last.HasText("The human answered: main") || !last.HasText("SCEN-cx edit") || last.Turn < 2 {
		t.Fatalf("resumed request lacks earlier turns: turn %d", last.Turn)
	}
	r.fake.Script("SCEN-cxnores", modelfake.Turns(modelfake.Text("Nothing to review here.")))
	nores := r.run("task-20260101-013", "SCEN-cxnores", t.TempDir(), "")
	if nores.Raw["error_reason"] != doc.ReasonNoResult || !strings.Contains(nores.Raw["error"].(string), "Nothing to review here.") {
		t.Fatalf("no result: %v", nores.Raw)
	}
}

// worktree makes a linked git worktree like a general's task checkout:
// its .git is a file pointing into a clone elsewhere.
func worktree(t *testing.T) string {
	t.Helper()
	clone, wt := t.TempDir(), filepath.Join(t.TempDir(), "repo")
	gitOut(t, clone, "init", "-q", "-b", "main")
	gitOut(t, clone, "-c", "user.name=t", "-c", "user.email=t@kingdom.invalid", "commit", "-q", "--allow-empty", "-m", "init")
	gitOut(t, clone, "worktree", "add", "-q", "--detach", wt)
	return wt
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

func readTrim(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SPEC §10.4: the other refusals of the real CLIs, with the fix.
func TestRealEngines_RefusalsNameTheFix(t *testing.T) {
	for _, tc := range []struct {
		engine, want string
		tune         func(r *realRig)
	}{
		{"claude", "runtime.claude.args", func(r *realRig) { r.sys.Runtime.Claude.Args = []string{"--no-such-flag"} }},
		{"codex", "runtime.codex.args", func(r *realRig) { r.sys.Runtime.Codex.Args = []string{"--no-such-flag"} }},
		{"claude", "ANTHROPIC_API_KEY", func(r *realRig) { r.env = dropEnv(r.env, "ANTHROPIC_API_KEY") }},
		{"codex", "OPENAI_API_KEY", func(r *realRig) { r.env = dropEnv(r.env, "OPENAI_API_KEY") }},
	} {
		t.Run(tc.engine+" "+tc.want, func(t *testing.T) {
			r := newRealRig(t, tc.engine)
			tc.tune(r)
			out := r.run("task-20260101-021", "SCEN-refused", t.TempDir(), "")
			e, _ := out.Raw["error"].(string)
			if out.Raw["error_reason"] != doc.ReasonEngineRefused || !strings.Contains(e, tc.want) {
				t.Fatalf("raw %v", out.Raw)
			}
		})
	}
}

func dropEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// SPEC §10.9 with codex: the classifier runs read-only and ephemeral, with
// no claude model name, and its answer routes.
func TestRealCodex_PetitionRoutes(t *testing.T) {
	r := newRealRig(t, "codex")
	r.fake.Script("SCEN-cxpet", modelfake.Always(modelfake.Text(`{"general": "gen-real"}`)))
	dir := t.TempDir()
	prompt := filepath.Join(dir, "p.md")
	os.WriteFile(prompt, []byte("SCEN-cxpet route this DM"), 0o600)
	out := filepath.Join(r.base, "state", "king", "petition-results", "evt-slack-msg-1.json")
	king := config.DefaultKing()
	err := Petition(context.Background(), PetitionOptions{BaseDir: r.base, EventID: "evt-slack-msg-1", PromptFile: prompt, Out: out,
		Timeout: 60 * time.Second, Models: king.Petition.ModelFor, System: r.sys, Environ: r.env})
	b, _ := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `"general": "gen-real"`) {
		t.Fatalf("petition: %v %s", err, b)
	}
	reqs := r.fake.Requests("SCEN-cxpet")
	if len(reqs) == 0 || strings.Contains(string(reqs[0].Body), "haiku") {
		t.Fatalf("codex petition requests %d; a claude model name reached codex", len(reqs))
	}
	if files, _ := filepath.Glob(filepath.Join(r.home, ".codex", "sessions", "*", "*", "*", "*.jsonl")); len(files) != 0 {
		t.Fatalf("an ephemeral petition left sessions: %v", files)
	}
}
