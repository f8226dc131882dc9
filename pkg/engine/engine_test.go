package engine

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

func TestClaudeArgs_ExactInvocation(t *testing.T) {
	got := ClaudeArgs("claude", "opus", "sess-1", []string{"--permission-mode", "bypassPermissions"})
	want := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "opus", "--resume", "sess-1", "--permission-mode", "bypassPermissions"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = ClaudeArgs("claude", "", "", nil)
	want = []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestCodexArgs_ResumeToken(t *testing.T) {
	got := CodexArgs("codex", "", "tok")
	want := []string{"codex", "exec", "--json", "--skip-git-repo-check", "resume", "tok", "-"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
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
	environ := []string{"PATH=/bin", "SLACK_BOT_TOKEN=xoxb-secret", "JIRA_API_TOKEN=j", "HOME=/h", "KINGDOM_TMUX_SOCKET=s", "KINGDOM_TASK_ID=old", "GH_TOKEN=g"}
	got := Env(environ, []string{"PATH", "HOME", "GH_TOKEN"}, map[string]string{"KINGDOM_TASK_ID": "task-2"})
	joined := strings.Join(got, "\n")
	for _, bad := range []string{"SLACK", "JIRA", "KINGDOM_TASK_ID=old"} {
		if strings.Contains(joined, bad) {
			t.Errorf("env leaks %s: %q", bad, got)
		}
	}
	for _, good := range []string{"PATH=/bin", "HOME=/h", "GH_TOKEN=g", "KINGDOM_TMUX_SOCKET=s", "KINGDOM_TASK_ID=task-2"} {
		if !strings.Contains(joined, good) {
			t.Errorf("env misses %s: %q", good, got)
		}
	}
}

func TestClaudeParser_SessionAndResultLine(t *testing.T) {
	p := NewParser("claude")
	for _, l := range []string{
		`{"type":"system","subtype":"init","session_id":"s-init"}`,
		`not json at all`,
		`{"type":"assistant","message":{"content":[]},"session_id":"s-init"}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"{\"general\":\"gen-pr\"}","session_id":"s-final","usage":{"input_tokens":10,"output_tokens":3},"total_cost_usd":0.01}`,
	} {
		p.Line([]byte(l))
	}
	if p.SessionID() != "s-final" {
		t.Errorf("session = %q", p.SessionID())
	}
	if p.FinalText() != `{"general":"gen-pr"}` || p.IsError() {
		t.Errorf("final = %q err=%v", p.FinalText(), p.IsError())
	}
	if p.Usage()["input_tokens"].(float64) != 10 || p.Usage()["total_cost_usd"].(float64) != 0.01 {
		t.Errorf("usage = %v", p.Usage())
	}
}

func TestCodexParser_BestEffort(t *testing.T) {
	p := NewParser("codex")
	p.Line([]byte(`{"type":"thread.started","thread_id":"th-1"}`))
	p.Line([]byte(`{"type":"item.completed","item":{"type":"agent_message","text":"done"}}`))
	if p.SessionID() != "th-1" || p.FinalText() != "done" {
		t.Fatalf("got %q %q", p.SessionID(), p.FinalText())
	}
	q := NewParser("codex")
	q.Line([]byte(`{"id":"0","msg":{"type":"session_configured","session_id":"old-1"}}`))
	q.Line([]byte(`{"id":"1","msg":{"type":"agent_message","message":"hi"}}`))
	if q.SessionID() != "old-1" || q.FinalText() != "hi" {
		t.Fatalf("got %q %q", q.SessionID(), q.FinalText())
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
			_ = p.SessionID()
			_ = p.FinalText()
		}
		var m map[string]any
		ExtractJSONObject(string(line), &m)
	})
}
