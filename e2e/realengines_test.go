package e2e

// The real engines, end to end (SPEC §10): the kingdom's real binaries run
// the real `claude` and `codex` CLIs installed from package.json
// (node_modules/.bin), pointed at pkg/modelfake, a local fake of the
// Anthropic Messages and OpenAI Responses APIs. One kingdom per engine; the
// scenarios of a kingdom run in parallel, each with its own prompt marker
// that selects its script in the fake.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// realKingdom is a kingdom whose soldiers run a real CLI.
type realKingdom struct {
	*Kingdom
	engine string
	fake   *modelfake.Server
	slack  *slackfake.Server
	home   string // the private HOME of every role and soldier
	// user, when set, runs the whole kingdom (every role, so every
	// soldier) as an unprivileged user; nil runs it as the test's user.
	user *unprivileged
}

const realWait = 120 * time.Second

func newRealKingdom(t *testing.T, eng string) *realKingdom {
	t.Helper()
	return newRealKingdomAs(t, eng, nil)
}

// newRealKingdomAs starts a real kingdom run by user (nil: the test's own
// user).
func newRealKingdomAs(t *testing.T, eng string, user *unprivileged) *realKingdom {
	t.Helper()
	cli := modelfake.FindCLI(t, eng)
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	home := t.TempDir()
	if user != nil {
		cli, home = user.reach(cli), user.home
	}
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(fake.CodexConfig()), 0o600)
	// Every key not named keeps its shipped default: runtime.claude.args
	// and runtime.codex.args are the defaults under test.
	sys := fmt.Sprintf(`runtime:
  engine: %s
  claude:
    command: %q
  codex:
    command: %q
  env_passthrough: [PATH, HOME, LANG, TZ, ANTHROPIC_API_KEY, OPENAI_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_AUTOUPDATER]
watchdog:
  interval_seconds: 1
`, eng, cli, cli)
	env := "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\nOPENAI_API_KEY=sk-e2e-openai-fake\n"
	for k, v := range fake.ClaudeEnv() {
		env += k + "=" + v + "\n"
	}
	files := map[string]string{
		"config/system.yaml": sys,
		"config/king.yaml":   "retry:\n  max_attempts: 1\n  backoff_seconds: 1\n  max_backoff_seconds: 2\npetition:\n  timeout_seconds: 60\n",
		"config/envoy.yaml":  fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		// The suite loads the machine on purpose; CPU alone must not close
		// admission (health re-evaluated every second).
		"config/chamberlain.yaml":               "monitoring:\n  interval_seconds: 1\nthresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n",
		"config/generals/gen-real.yaml":         "name: gen-real\ndescription: \"Reviews and fixes code; handles every request about code.\"\ntimeout_seconds: 240\nmax_concurrent: 4\nsubscribes: [\"test.*\"]\n",
		"config/generals/templates/gen-real.md": "Task {{task_id}}.\n\n{{payload.text}}\n",
		"config/kingdom.env":                    env,
	}
	k := NewKingdom(t, files)
	os.Chmod(k.L.EnvFile(), 0o600)
	rk := &realKingdom{Kingdom: k, engine: eng, fake: fake, slack: slack, home: home, user: user}
	if user != nil {
		user.adopt(k)
	}
	rk.startWithHome()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-real")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}
	return rk
}

// startWithHome is Kingdom.Start with the private HOME (the CLIs keep their
// sessions and config there).
func (k *realKingdom) startWithHome() {
	k.t.Helper()
	out, err := os.Create(filepath.Join(k.L.Base, "start.out"))
	if err != nil {
		k.t.Fatal(err)
	}
	k.out = out
	k.start = k.command("start", "--base-dir", k.L.Base)
	var env []string
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "CLAUDE") {
			env = append(env, kv)
		}
	}
	k.start.Env = append(env, "HOME="+k.home, "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket)
	k.start.Stdout, k.start.Stderr = out, out
	if err := k.start.Start(); err != nil {
		k.t.Fatal(err)
	}
}

// drop queues an inbox event whose prompt carries marker; it returns the
// event id.
func (k *realKingdom) drop(marker, text string) string {
	id := "evt-real-" + strings.ToLower(marker)
	k.dropInbox(strings.ToLower(marker), map[string]any{"id": id, "type": "test.real", "priority": "high",
		"payload": map[string]any{"text": marker + " " + text}})
	return id
}

// taskOf waits for the task made from an event.
func (k *realKingdom) taskOf(t *testing.T, evID string) string {
	t.Helper()
	var task string
	k.Eventually("a task for "+evID, realWait, func() bool {
		if tk := k.TaskForEvent(evID); tk != nil {
			task = tk.ID
			return true
		}
		return false
	})
	return task
}

// final waits for the task's final notification to reach Slack and
// returns its text.
func (k *realKingdom) final(t *testing.T, task, kind string) string {
	t.Helper()
	id := "msg-" + task + "-" + kind
	k.Eventually(id+" sent", realWait, func() bool { return k.Msgs.Exists(layout.Sent, id) })
	b, _ := k.Msgs.Read(layout.Sent, id)
	var m doc.Message
	json.Unmarshal(b, &m)
	// Sent means posted: the text is what the fake Slack received.
	posted := false
	for _, c := range k.slack.Calls("chat.postMessage") {
		posted = posted || strings.Contains(c.Form.Get("text"), m.Content)
	}
	if !posted {
		t.Fatalf("%s is sent but the fake Slack never received %q", id, m.Content)
	}
	return m.Content
}

// thread returns every text the envoy posted in the task's thread.
func (k *realKingdom) thread(task string) string {
	b, err := k.Msgs.Read(layout.Sent, "msg-"+task+"-start")
	if err != nil {
		return ""
	}
	var m struct {
		Slack struct {
			Channel string `json:"channel"`
			TS      string `json:"ts"`
		} `json:"slack"`
	}
	json.Unmarshal(b, &m)
	var texts []string
	for _, c := range k.slack.Calls("chat.postMessage") {
		if c.Form.Get("channel") == m.Slack.Channel && c.Form.Get("thread_ts") == m.Slack.TS {
			texts = append(texts, c.Form.Get("text"))
		}
	}
	return strings.Join(texts, "\n")
}

// reply answers a task's question with the real `envoy reply` and returns
// the resume task's id once it exists.
func (k *realKingdom) reply(t *testing.T, task, text string) string {
	t.Helper()
	k.final(t, task, "question")
	// The envoy records that the task awaits a reply just after posting
	// the question: a reply a moment too early is refused, so try again.
	for try := 0; ; try++ {
		cmd := k.command("envoy", "reply", "--base-dir", k.L.Base, task, text)
		cmd.Env = append(cleanEnv(), "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket, "KINGDOM_BASE_DIR="+k.L.Base)
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		if try == 20 || !bytes.Contains(out, []byte("not waiting for a reply")) {
			t.Fatalf("envoy reply: %v: %s", err, out)
		}
		time.Sleep(500 * time.Millisecond) // the envoy's state catches up
	}
	var resume string
	k.Eventually("the resume task of "+task, realWait, func() bool {
		for _, st := range []string{layout.Pending, layout.InProgress, layout.Completed} {
			for _, tk := range k.TaskList(st) {
				if tk.Type == doc.TaskTypeResume && tk.OriginalTaskID == task {
					resume = tk.ID
					return true
				}
			}
		}
		return false
	})
	return resume
}

func so(fields map[string]any) modelfake.Reply { return modelfake.Tool("StructuredOutput", fields) }

// result is the agent's answer in the engine's structured form: claude's
// StructuredOutput tool call, codex's final JSON message (strict: every
// property, null when unused).
func (k *realKingdom) result(fields map[string]any) modelfake.Reply {
	if k.engine == "claude" {
		return so(fields)
	}
	full := map[string]any{"error": nil, "reason": nil, "question": nil, "memory_updates": nil, "notify_channel": nil, "proclamation": nil}
	for f, v := range fields {
		full[f] = v
	}
	b, _ := json.Marshal(full)
	return modelfake.Text(string(b))
}

func (k *realKingdom) attempts(task string) int {
	n := 0
	for _, ev := range k.InternalEvents() {
		var d map[string]any
		json.Unmarshal(ev.Data, &d)
		if ev.Type == "soldier.spawned" && d["task_id"] == task {
			n++
		}
	}
	return n
}

// scenarios are the cases every engine must pass, in parallel.
func (k *realKingdom) scenarios(t *testing.T) {
	up := strings.ToUpper(k.engine)
	t.Run("success from structured output, ✅ carries the summary", func(t *testing.T) {
		t.Parallel()
		m := "SCEN-" + up + "-OK"
		k.fake.Script(m, modelfake.Turns(
			modelfake.Shell("git --version"),
			k.result(map[string]any{"status": "success", "summary": "Reviewed the change: LGTM " + m}),
		))
		task := k.taskOf(t, k.drop(m, "please review"))
		done := k.final(t, task, "done")
		if !strings.Contains(done, "✅") || !strings.Contains(done, "Reviewed the change: LGTM") {
			t.Fatalf("✅ message %q lacks the summary", done)
		}
		r := k.Result(task)
		if r == nil || r.Status != "success" || r.Usage == nil || r.Usage.InputTokens == 0 {
			t.Fatalf("final result %+v", r)
		}
		if k.engine == "claude" && (r.CostUSD == nil || engine.CheckSessionID("claude", r.SessionID) != nil) {
			t.Fatalf("claude result lacks cost or session: %+v", r)
		}
		reqs := k.fake.Requests(m)
		if len(reqs) < 2 || len(reqs[1].ToolResults) == 0 || !strings.Contains(strings.Join(reqs[1].ToolResults, "\n"), "git version") {
			t.Fatalf("the agent's git command did not run under the default permissions: %+v", reqs)
		}
	})
	t.Run("needs_human, envoy reply, the same session resumed in the same cwd", func(t *testing.T) {
		t.Parallel()
		m := "SCEN-" + up + "-ASK"
		k.fake.Script(m, modelfake.Turns(
			k.result(map[string]any{"status": "needs_human", "summary": "blocked", "question": "Which branch should I target?"}),
			k.result(map[string]any{"status": "success", "summary": "Targeted the answered branch " + m}),
		))
		task := k.taskOf(t, k.drop(m, "please fix"))
		resume := k.reply(t, task, "target the release branch")
		done := k.final(t, resume, "done")
		if !strings.Contains(done, "Targeted the answered branch") {
			t.Fatalf("✅ %q", done)
		}
		first, second := k.Result(task), k.Result(resume)
		if first.SessionID == "" || second.SessionID != first.SessionID {
			t.Fatalf("sessions: first %q, resume %q", first.SessionID, second.SessionID)
		}
		reqs := k.fake.Requests(m)
		last := reqs[len(reqs)-1]
		if last.Turn < 1 || !last.HasText("target the release branch") || !last.HasText(m+" please fix") || !last.HasText("Which branch should I target?") {
			t.Fatalf("the resumed request lacks the earlier turns (turn %d)", last.Turn)
		}
	})
	t.Run("no result: one attempt, NoResult, ❌ quotes the agent's last text", func(t *testing.T) {
		t.Parallel()
		m := "SCEN-" + up + "-NORES"
		k.fake.Script(m, modelfake.Always(modelfake.Text("I looked everywhere but found no pull request to review.")))
		task := k.taskOf(t, k.drop(m, "please review"))
		failed := k.final(t, task, "failed")
		if !strings.Contains(failed, "NoResult") || !strings.Contains(failed, "found no pull request to review") {
			t.Fatalf("❌ %q", failed)
		}
		if r := k.Result(task); r == nil || r.ErrorReason != doc.ReasonNoResult || r.RetryCount != 0 || k.attempts(task) != 1 {
			t.Fatalf("result %+v after %d attempts, want one NoResult attempt", r, k.attempts(task))
		}
	})
	t.Run("an API error is quoted in the ❌", func(t *testing.T) {
		t.Parallel()
		m := "SCEN-" + up + "-CREDIT"
		k.fake.Script(m, modelfake.Always(modelfake.APIError(400, "invalid_request_error",
			"Your credit balance is too low to access the API. Please go to Plans & Billing to upgrade or purchase credits.")))
		task := k.taskOf(t, k.drop(m, "please review"))
		failed := k.final(t, task, "failed")
		if !strings.Contains(strings.ToLower(failed), "credit balance is too low") {
			t.Fatalf("❌ %q does not quote the API error", failed)
		}
	})
	t.Run("a resume whose session was deleted fails SessionLost in the thread", func(t *testing.T) {
		t.Parallel()
		m := "SCEN-" + up + "-LOST"
		k.fake.Script(m, modelfake.Turns(
			k.result(map[string]any{"status": "needs_human", "summary": "blocked", "question": "Shall I proceed?"}),
			k.result(map[string]any{"status": "success", "summary": "should never happen"}),
		))
		task := k.taskOf(t, k.drop(m, "please fix"))
		k.final(t, task, "question")
		sid := k.Result(task).SessionID
		k.deleteSession(t, sid)
		resume := k.reply(t, task, "yes")
		failed := k.final(t, resume, "failed")
		if !strings.Contains(failed, "SessionLost") || !strings.Contains(k.thread(task), "SessionLost") {
			t.Fatalf("❌ %q / thread %q do not say SessionLost", failed, k.thread(task))
		}
	})
}

// petition: a Slack DM is classified by a petition that runs with no
// tools (the fake sees an empty tools list) and routed to the general.
func (k *realKingdom) petition(t *testing.T) {
	t.Parallel()
	m := "SCEN-CLAUDE-DM"
	k.fake.Script(m, func(r modelfake.Request) modelfake.Reply {
		if len(r.Tools) == 0 { // the classifier
			return modelfake.Text(`{"general": "gen-real"}`)
		}
		return so(map[string]any{"status": "success", "summary": "Handled the DM " + m})
	})
	ts := "1795400100.000200"
	if _, err := k.slack.PushMessage(slackfake.Msg{Channel: "D0HUMAN", ChannelType: "im", User: "UHUMAN", Text: m + " can someone look at the flaky test?", TS: ts}); err != nil {
		t.Fatal(err)
	}
	task := k.taskOf(t, "evt-slack-msg-1795400100-000200")
	if tk := k.TaskForEvent("evt-slack-msg-1795400100-000200"); tk.TargetGeneral != "gen-real" {
		t.Fatalf("routed to %s", tk.TargetGeneral)
	}
	k.final(t, task, "done")
	var petitions int
	for _, r := range k.fake.Requests(m) {
		if len(r.Tools) == 0 {
			petitions++
		}
	}
	if petitions == 0 {
		t.Fatalf("no request of the classifier came with an empty tools list: %d requests", len(k.fake.Requests(m)))
	}
}

// deleteSession removes the CLI's stored session, as a cleanup or a new
// machine would.
func (k *realKingdom) deleteSession(t *testing.T, sid string) {
	t.Helper()
	var files []string
	switch k.engine {
	case "claude":
		files, _ = filepath.Glob(filepath.Join(k.home, ".claude", "projects", "*", sid+".jsonl"))
	case "codex":
		files, _ = filepath.Glob(filepath.Join(k.home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+sid+".jsonl"))
	}
	if len(files) == 0 {
		t.Fatalf("no stored session %s under %s", sid, k.home)
	}
	for _, f := range files {
		os.Remove(f)
	}
}

func TestRealEngines_Claude(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real claude CLI")
	}
	k := newRealKingdom(t, "claude")
	t.Run("parallel", func(t *testing.T) {
		k.scenarios(t)
		t.Run("a petition runs with no tools and routes the DM", k.petition)
	})
	t.Run("bypass as root: EngineRefused on the first attempt, doctor names the fix", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("bypass mode is refused only as root")
		}
		sysPath := k.L.ConfigFile("system.yaml")
		orig, _ := os.ReadFile(sysPath)
		bypass := strings.Replace(string(orig), "  codex:\n", "    args: [--permission-mode, bypassPermissions]\n  codex:\n", 1)
		os.WriteFile(sysPath, []byte(bypass), 0o600)
		defer os.WriteFile(sysPath, orig, 0o600)
		doc := exec.Command(filepath.Join(binDir, "start"), "doctor", "--base-dir", k.L.Base)
		doc.Env = append(cleanEnv(), "HOME="+k.home)
		out, err := doc.CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("acceptEdits")) || !bytes.Contains(out, []byte("permission mode")) {
			t.Fatalf("doctor with bypass as root: err %v\n%s", err, out)
		}
		m := "SCEN-CLAUDE-BYPASS"
		task := k.taskOf(t, k.drop(m, "please review"))
		failed := k.final(t, task, "failed")
		if !strings.Contains(failed, "EngineRefused") || !strings.Contains(failed, "root/sudo") || !strings.Contains(failed, "acceptEdits") {
			t.Fatalf("❌ %q", failed)
		}
		if n := k.attempts(task); n != 1 {
			t.Fatalf("%d attempts, want 1 (refusals are terminal)", n)
		}
	})
}

func TestRealEngines_Codex(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real codex CLI")
	}
	k := newRealKingdom(t, "codex")
	t.Run("parallel", k.scenarios)
}
