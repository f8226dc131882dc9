package engine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

func TestClaudeArgs_ExactInvocation(t *testing.T) {
	got := ClaudeArgs(ClaudeRun{Command: "claude", Model: "opus", Resume: "sess-1", SessionID: "ignored", Extra: []string{"--permission-mode", "acceptEdits"}})
	want := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "opus", "--resume", "sess-1", "--permission-mode", "acceptEdits",
		"--setting-sources", "", "--settings", `{"disableAllHooks":true}`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = ClaudeArgs(ClaudeRun{Command: "claude", SessionID: "u-1", Schema: []byte(`{"type":"object"}`)})
	want = []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--session-id", "u-1", "--json-schema", `{"type":"object"}`,
		"--setting-sources", "", "--settings", `{"disableAllHooks":true}`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestCodexArgs_ExecFlagsBeforeResume(t *testing.T) {
	got := CodexArgs(CodexRun{Command: "codex", Resume: "tok", Extra: []string{"--sandbox", "workspace-write"}, SchemaFile: "/s.json", LastMessageFile: "/o.txt"})
	want := []string{"codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
		"-c", "sandbox_workspace_write.network_access=false", "--output-schema", "/s.json", "-o", "/o.txt", "resume", "tok", "-"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}

// Kingdom's lockdown comes after the configured args, which therefore
// cannot undo it (the later flag wins in both CLIs); the manifest's
// engine_network is the one opt-in (SPEC §12.3).
func TestArgs_LockdownAfterConfiguredArgs(t *testing.T) {
	got := CodexArgs(CodexRun{Command: "codex", Extra: []string{"-c", "sandbox_workspace_write.network_access=true"}})
	if i := slices.Index(got, "sandbox_workspace_write.network_access=false"); i < 0 || i < slices.Index(got, "sandbox_workspace_write.network_access=true") {
		t.Fatalf("codex args %q: Kingdom's network_access=false must come last", got)
	}
	if got := CodexArgs(CodexRun{Command: "codex", Network: true}); !slices.Contains(got, "sandbox_workspace_write.network_access=true") {
		t.Fatalf("opted-in codex args %q", got)
	}
	got = ClaudeArgs(ClaudeRun{Command: "claude", Extra: []string{"--setting-sources", "user,project,local"}})
	if !reflect.DeepEqual(got[len(got)-4:], ClaudeSettings) {
		t.Fatalf("claude args %q must end with Kingdom's settings %q", got, ClaudeSettings)
	}
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = "true"
	inv, err := Build(Spec{Engine: config.EngineClaude, System: sys, Petition: true})
	if err != nil || !reflect.DeepEqual(inv.Args[len(inv.Args)-4:], ClaudeSettings) {
		t.Fatalf("petition args %v (%v) must end with Kingdom's settings", inv, err)
	}
}

func TestPetitionArgs_NoToolsNoSessionNoConfiguredArgs(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command, sys.Runtime.Codex.Command = "true", "true"
	sys.Runtime.Claude.Args = []string{"--permission-mode", "bypassPermissions"}
	inv, err := Build(Spec{Engine: "claude", System: sys, Model: "haiku", Petition: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"true", "-p", "--output-format", "stream-json", "--verbose", "--model", "haiku", "--tools", "", "--no-session-persistence",
		"--setting-sources", "", "--settings", `{"disableAllHooks":true}`}
	if !reflect.DeepEqual(inv.Args, want) {
		t.Fatalf("claude petition %q, want %q", inv.Args, want)
	}
	inv, err = Build(Spec{Engine: "codex", System: sys, Petition: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"true", "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "--ephemeral", "-"}
	if !reflect.DeepEqual(inv.Args, want) {
		t.Fatalf("codex petition %q, want %q", inv.Args, want)
	}
}

func TestBuild_ResumeTokenValidatedBeforeArgv(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command, sys.Runtime.Codex.Command = "true", "true"
	for _, tok := range []string{"--settings=/tmp/evil.json", "../../etc", "abc", "11111111-2222-4333-8444-55555555555g"} {
		for _, eng := range []string{"claude", "codex"} {
			if _, err := Build(Spec{Engine: eng, System: sys, Resume: tok}); !errors.Is(err, ErrBadSession) {
				t.Errorf("%s resume %q: err %v, want ErrBadSession", eng, tok, err)
			}
		}
	}
	if _, err := Build(Spec{Engine: "claude", System: sys, SessionID: "--settings"}); !errors.Is(err, ErrBadSession) {
		t.Errorf("claude session id not validated: %v", err)
	}
	id := NewSessionID()
	inv, err := Build(Spec{Engine: "claude", System: sys, SessionID: id})
	if err != nil || !strings.Contains(strings.Join(inv.Args, " "), "--session-id "+id) {
		t.Fatalf("fresh session id %s: %v %+v", id, err, inv)
	}
	if _, err := Build(Spec{Engine: "codex", System: sys, Resume: "01a20f2d-4a8a-7990-ac76-a404c2689399"}); err != nil {
		t.Errorf("codex thread id refused: %v", err)
	}
}

func TestCommandArgs_SubstitutesPerElementWithoutReexpansion(t *testing.T) {
	vals := map[string]string{"{prompt_file}": "/p/{task_id}.md", "{task_id}": "t-1", "{workdir}": "/w", "{result_path}": "/r"}
	got := CommandArgs([]string{"agent", "--in={prompt_file}", "{task_id}", "{unknown}", "$(rm -rf /)", "{workdir}/{result_path}", "{"}, vals)
	want := []string{"agent", "--in=/p/{task_id}.md", "t-1", "{unknown}", "$(rm -rf /)", "/w//r", "{"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestBuild_MissingExecutableIsErrMissing(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = filepath.Join(t.TempDir(), "no-such-claude")
	_, err := Build(Spec{Engine: "claude", System: sys})
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("err = %v, want ErrMissing", err)
	}
}

func TestBuild_CommandResolvesPath(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Command.Argv = []string{"true", "{task_id}"}
	inv, err := Build(Spec{Engine: "command", System: sys, TaskID: "task-1", Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if inv.StdinPrompt || inv.Args[1] != "task-1" || !filepath.IsAbs(inv.Path) {
		t.Fatalf("bad invocation %+v", inv)
	}
}

func TestEnv_OnlyPassthroughAndKingdom(t *testing.T) {
	// The dashboard's token is a KINGDOM_* variable too; soldier-spawn
	// registers it as a secret from the config (default name here).
	redact.SetExtraNames(append(config.SecretEnvNames(t.TempDir()), "DEPLOY_KEY"))
	defer redact.SetExtraNames(nil)
	environ := []string{"PATH=/bin", "SLACK_BOT_TOKEN=xoxb-secret", "JIRA_API_TOKEN=j", "HOME=/h", "KINGDOM_TMUX_SOCKET=s", "KINGDOM_TASK_ID=old",
		"GH_TOKEN=ghp-write", "GITHUB_TOKEN=ghp-write2", "KINGDOM_HTTP_TOKEN=dash-secret", "KINGDOM_PG_DSN=postgres://u:pw@h/db", "DEPLOY_KEY=dk",
		"ANTHROPIC_API_KEY=ak", "CLAUDE_CODE_OAUTH_TOKEN=oat", "OPENAI_API_KEY=ok", "ANTHROPIC_BASE_URL=http://x", "RANDOM=r"}
	// Even a passthrough that names them (config refuses it; a caller
	// that skipped the config must not leak either) carries no credential
	// but the engine's own model key (SPEC §12.3).
	all := []string{"PATH", "HOME", "GH_TOKEN", "GITHUB_TOKEN", "SLACK_BOT_TOKEN", "JIRA_API_TOKEN", "DEPLOY_KEY", "KINGDOM_PG_DSN",
		"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"}
	for _, c := range []struct {
		engine    string
		good, bad []string
	}{
		{config.EngineClaude, []string{"ANTHROPIC_API_KEY=ak", "CLAUDE_CODE_OAUTH_TOKEN=oat", "ANTHROPIC_BASE_URL=http://x"}, []string{"OPENAI_API_KEY"}},
		{config.EngineCodex, []string{"OPENAI_API_KEY=ok"}, []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}},
		{config.EngineCommand, nil, []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"}},
	} {
		got := Env(c.engine, environ, all, map[string]string{"KINGDOM_TASK_ID": "task-2"})
		joined := strings.Join(got, "\n")
		for _, bad := range append(c.bad, "SLACK", "JIRA", "GH_TOKEN", "GITHUB_TOKEN", "ghp-write", "KINGDOM_TASK_ID=old", "dash-secret", "KINGDOM_PG_DSN", "DEPLOY_KEY", "RANDOM") {
			if strings.Contains(joined, bad) {
				t.Errorf("%s env leaks %s: %q", c.engine, bad, got)
			}
		}
		for _, good := range append(c.good, "PATH=/bin", "HOME=/h", "KINGDOM_TMUX_SOCKET=s", "KINGDOM_TASK_ID=task-2") {
			if !slices.Contains(got, good) {
				t.Errorf("%s env misses %s: %q", c.engine, good, got)
			}
		}
	}
	// What the run itself adds (the manifest's read token as GH_TOKEN)
	// is the caller's to decide.
	if got := Env(config.EngineClaude, environ, nil, map[string]string{"GH_TOKEN": "read"}); !slices.Contains(got, "GH_TOKEN=read") || slices.Contains(got, "GH_TOKEN=ghp-write") {
		t.Errorf("extra GH_TOKEN: %q", got)
	}
}

func TestClaudeParser_SessionAndResultLine(t *testing.T) {
	p := NewParser("claude")
	for _, l := range []string{
		`{"type":"system","subtype":"init","session_id":"s-init"}`,
		`not json at all`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"thinking aloud"}]},"session_id":"s-init"}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"{\"general\":\"gen-pr\"}","session_id":"s-final","usage":{"input_tokens":10,"output_tokens":3,"cache_read_input_tokens":7,"cache_creation_input_tokens":2},"total_cost_usd":0.01,"structured_output":{"status":"success","summary":"ok"}}`,
	} {
		p.Line([]byte(l))
	}
	o := p.Outcome()
	if o.SessionID != "s-final" || !o.Ended || o.IsError {
		t.Errorf("outcome %+v", o)
	}
	if o.FinalText != `{"general":"gen-pr"}` {
		t.Errorf("final = %q", o.FinalText)
	}
	if o.Usage == nil || *o.Usage != (doc.Usage{InputTokens: 10, OutputTokens: 3, CacheReadInputTokens: 7, CacheCreationInputTokens: 2}) || o.CostUSD == nil || *o.CostUSD != 0.01 {
		t.Errorf("usage = %+v cost %v", o.Usage, o.CostUSD)
	}
	if string(o.Structured) != `{"status":"success","summary":"ok"}` {
		t.Errorf("structured = %s", o.Structured)
	}
}

// Lines as the real claude 2.1.328 prints them (ENGINES.md).
func TestClaudeParser_ReasonsAndSignals(t *testing.T) {
	p := NewParser("claude")
	if p.Line([]byte(`{"type":"system","subtype":"api_retry","attempt":1,"retry_delay_ms":500,"error_status":429}`)) {
		t.Error("api_retry counted as progress")
	}
	if !p.Line([]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1764000000,"rateLimitType":"five_hour"}}`)) {
		t.Error("rate_limit_event not progress")
	}
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"result":"Credit balance is too low","session_id":"s","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"permission_denials":[{"tool_name":"Bash","tool_input":{"command":"rm -rf /x"}}],"errors":["boom"]}`))
	o := p.Outcome()
	kinds := []string{}
	for _, s := range o.Signals {
		kinds = append(kinds, s.Kind)
	}
	if !reflect.DeepEqual(kinds, []string{"api_retry", "rate_limit_event", "result"}) {
		t.Errorf("signals %v", kinds)
	}
	r := o.Reason()
	for _, want := range []string{"API error status 400", "Credit balance is too low", "boom", "permission denied: Bash(rm -rf /x)"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason %q lacks %q", r, want)
		}
	}
}

func TestCodexParser_ThreadTextUsageAndFailure(t *testing.T) {
	p := NewParser("codex")
	for _, l := range []string{
		`{"type":"thread.started","thread_id":"01a20f2d-4a8a-7990-ac76-a404c2689399"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for x not found"}}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"done"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":50,"output_tokens":40}}`,
	} {
		p.Line([]byte(l))
	}
	o := p.Outcome()
	if o.SessionID != "01a20f2d-4a8a-7990-ac76-a404c2689399" || o.FinalText != "done" || !o.Ended || o.IsError {
		t.Fatalf("outcome %+v", o)
	}
	if *o.Usage != (doc.Usage{InputTokens: 150, OutputTokens: 40, CacheReadInputTokens: 50}) || o.CostUSD != nil {
		t.Fatalf("usage %+v cost %v", o.Usage, o.CostUSD)
	}
	q := NewParser("codex")
	q.Line([]byte(`{"type":"error","message":"Missing environment variable: ` + "`OPENAI_API_KEY`" + `."}`))
	q.Line([]byte(`{"type":"turn.failed","error":{"message":"You've hit your usage limit."}}`))
	o = q.Outcome()
	if !o.IsError || len(o.Signals) != 2 || o.Signals[1].Kind != "turn.failed" || !strings.Contains(o.Reason(), "usage limit") {
		t.Fatalf("outcome %+v", o)
	}
}

func TestClassify(t *testing.T) {
	ended := &Outcome{Ended: true, FinalText: "I looked and found nothing to do."}
	for name, tc := range map[string]struct {
		engine  string
		resumed bool
		code    int
		o       *Outcome
		stderr  string
		reason  string
		want    string
	}{
		"bypass as root":  {"claude", false, 1, &Outcome{}, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", doc.ReasonEngineRefused, "acceptEdits"},
		"unknown flag":    {"claude", false, 1, &Outcome{}, "error: unknown option '--bogus'", doc.ReasonEngineRefused, "runtime.claude.args"},
		"codex bad flag":  {"codex", false, 2, &Outcome{}, "error: unexpected argument '--bogus' found", doc.ReasonEngineRefused, "runtime.codex.args"},
		"not logged in":   {"claude", false, 1, &Outcome{Ended: true, IsError: true, FinalText: "Not logged in · Please run /login"}, "", doc.ReasonEngineRefused, "ANTHROPIC_API_KEY"},
		"codex no key":    {"codex", false, 1, &Outcome{Ended: true, IsError: true, Errors: []string{"Missing environment variable: `OPENAI_API_KEY`."}}, "", doc.ReasonEngineRefused, "OPENAI_API_KEY"},
		"claude lost":     {"claude", true, 1, &Outcome{Ended: true, IsError: true, Subtype: "error_during_execution", Errors: []string{"No conversation found with session ID: x"}}, "", doc.ReasonSessionLost, "No conversation found"},
		"codex lost":      {"codex", true, 1, &Outcome{}, "Error: thread/resume: thread/resume failed: no rollout found for thread id x", doc.ReasonSessionLost, "no rollout found"},
		"no result":       {"claude", false, 0, ended, "", doc.ReasonNoResult, "nothing to do"},
		"never complied":  {"claude", false, 1, &Outcome{Ended: true, IsError: true, Subtype: "error_max_structured_output_retries"}, "", doc.ReasonNoResult, "error_max_structured_output_retries"},
		"no credit":       {"claude", false, 1, &Outcome{Ended: true, IsError: true, APIErrorStatus: 400, FinalText: "Credit balance is too low"}, "", doc.ReasonEngineRefused, "Credit balance is too low — fix: the account has no credit left: add credits to the account or switch engine"},
		"api error":       {"claude", false, 1, &Outcome{Ended: true, IsError: true, APIErrorStatus: 500, FinalText: "API Error: 500 Internal server error"}, "", doc.ReasonEngineError, "500 Internal server error"},
		"crash":           {"codex", false, 139, &Outcome{}, "segfault", doc.ReasonEngineError, "segfault"},
		"not lost if new": {"claude", false, 1, &Outcome{Ended: true, IsError: true, Errors: []string{"No conversation found with session ID: x"}}, "", doc.ReasonEngineError, "No conversation"},
	} {
		t.Run(name, func(t *testing.T) {
			f := Classify(tc.engine, tc.resumed, tc.code, tc.o, tc.stderr, "system.yaml")
			if f.Reason != tc.reason || !strings.Contains(f.Message(), tc.want) {
				t.Fatalf("got %s %q, want %s ~%q", f.Reason, f.Message(), tc.reason, tc.want)
			}
		})
	}
}

func TestClaudeProjectDir_AndRemove(t *testing.T) {
	cfg := t.TempDir()
	cwd := "/tmp/kingdom.x/workspace/gen-a/tasks/task-20260101-001/repo"
	dir := ClaudeProjectDir(cfg, cwd)
	if filepath.Base(dir) != "-tmp-kingdom-x-workspace-gen-a-tasks-task-20260101-001-repo" {
		t.Fatalf("project dir %s", dir)
	}
	id := NewSessionID()
	os.MkdirAll(filepath.Join(dir, "memory"), 0o700)
	os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte("{}"), 0o600)
	if err := RemoveClaudeSession(cfg, cwd, "../../x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".jsonl")); err != nil {
		t.Fatal("a malformed id removed something")
	}
	if err := RemoveClaudeSession(cfg, cwd, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("project dir left: %v", err)
	}
	// A transcript the CLI filed under another name is found by its id.
	other := filepath.Join(cfg, "projects", "-very-long-path-hashed-abc123")
	os.MkdirAll(other, 0o700)
	id2 := NewSessionID()
	os.WriteFile(filepath.Join(other, id2+".jsonl"), []byte("{}"), 0o600)
	if err := RemoveClaudeSession(cfg, cwd, id2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("transcript filed elsewhere left: %v", err)
	}
	if ClaudeConfigDir([]string{"HOME=/h"}) != "/h/.claude" || ClaudeConfigDir([]string{"HOME=/h", "CLAUDE_CONFIG_DIR=/c"}) != "/c" {
		t.Fatal("config dir")
	}
}

func TestExtractJSONObject_FromProseAndFence(t *testing.T) {
	var v struct {
		General string `json:"general"`
	}
	if !ExtractJSONObject("Sure! ```json\n{\"general\": \"gen-herald\"}\n```", &v) || v.General != "gen-herald" {
		t.Fatalf("got %+v", v)
	}
	if ExtractJSONObject("no object {here", &v) {
		t.Fatal("expected no object")
	}
}

func FuzzParsers(f *testing.F) {
	f.Add([]byte(`{"type":"result","result":"x","session_id":"s"}`))
	f.Add([]byte(`{"item":{"type":"agent_message","text":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, e := range []string{"claude", "codex", "command"} {
			p := NewParser(e)
			p.Line(line)
			_ = p.Outcome().Reason()
		}
		var m map[string]any
		ExtractJSONObject(string(line), &m)
	})
}

// A run stopped by its permissions names the denied calls and the pattern
// that would allow them, whatever the failure (SPEC §10.3).
func TestClassify_DenialsAndTheirFix(t *testing.T) {
	long := strings.Repeat("I tried and tried. ", 200)
	for name, tc := range map[string]struct {
		code    int
		o       *Outcome
		reason  string
		want    []string
		notWant []string
	}{
		"no result blocked by a Bash pattern": {0, &Outcome{Ended: true, FinalText: "I could not read the task id.",
			Denials: []Denial{{Tool: "Bash", Arg: "printenv KINGDOM_TASK_ID"}}}, doc.ReasonNoResult,
			[]string{"permission denied: Bash(printenv KINGDOM_TASK_ID)", "its last words: I could not read the task id.",
				"runtime.claude.args", `--allowedTools "Bash(git:*),Bash(printenv:*)"`}, nil},
		"long last words keep the fix within the bound": {0, &Outcome{Ended: true, FinalText: long,
			Denials: []Denial{{Tool: "Bash", Arg: "FOO=1 make test"}}}, doc.ReasonNoResult,
			[]string{"Bash(make:*)"}, nil},
		"an error with denials of paths, tools and a question": {1, &Outcome{Ended: true, IsError: true, Subtype: "error_max_turns",
			Denials: []Denial{{Tool: "Write", Arg: "/etc/kingdom/x.conf"}, {Tool: "WebFetch", Arg: "https://example.com"},
				{Tool: "Bash", Arg: "(cd /x && rm -rf y)"}, {Tool: "AskUserQuestion", Arg: "Which branch?"}}}, doc.ReasonEngineError,
			[]string{"Write(/etc/kingdom/x.conf)", "--add-dir /etc/kingdom to runtime.claude.args", "WebFetch", "needs_human"}, []string{"Bash((cd:*)"}},
		"no denials, no fix": {0, &Outcome{Ended: true, FinalText: "nothing to do"}, doc.ReasonNoResult, nil, []string{"fix:"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := Classify("claude", false, tc.code, tc.o, "", "system.yaml")
			msg := Bound(f.Message())
			if f.Reason != tc.reason {
				t.Fatalf("reason %s, want %s (%q)", f.Reason, tc.reason, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("message %q has %q", msg, w)
				}
			}
		})
	}
}

// claude can end is_error: true with exit 0 (ENGINES.md): a failure in the
// engine's own words, never a NoResult "ended normally" nor a success.
func TestClassify_IsErrorWithExitZeroIsAFailureInTheEnginesWords(t *testing.T) {
	p := NewParser("claude")
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":true,"duration_ms":457,"num_turns":1,"result":"API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}","session_id":"7300d905-068c-4f29-a2e3-4ae5dff03078","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"permission_denials":[],"terminal_reason":"api_error","api_error_status":500,"errors":[]}`))
	f := Classify("claude", false, 0, p.Outcome(), "", "system.yaml")
	if f.Reason != doc.ReasonEngineError {
		t.Fatalf("reason %s (%q), want EngineError", f.Reason, f.Message())
	}
	for _, want := range []string{"is_error", "exited with code 0", "Internal server error", "API error status 500"} {
		if !strings.Contains(f.Message(), want) {
			t.Errorf("message %q lacks %q", f.Message(), want)
		}
	}
}
