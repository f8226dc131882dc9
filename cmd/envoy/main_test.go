package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

func buildEnvoy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "envoy")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func runBin(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLACK_BOT_TOKEN=", "SLACK_APP_TOKEN=", "SLACK_DEFAULT_CHANNEL=", "KINGDOM_TMUX_SOCKET=kingdom-test-envoy-cmd")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// Console mode end to end with the real binary: `envoy --once` posts a
// question to the console, `envoy reply` answers it, and the answer is a
// slack.thread.reply event in the queue.
func TestEnvoyBinary_ConsoleRoundTrip(t *testing.T) {
	bin := buildEnvoy(t)
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.ConfigFile("envoy.yaml"), []byte("slack:\n  default_channel: COPS\n"), 0o600)
	task := "task-20261121-001"
	repo := "acme/web"
	msg := doc.Message{ID: "msg-" + task + "-question", Type: doc.MessageHumanInputRequest, TaskID: &task,
		Urgency: "normal", Content: "Which branch?", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending",
		ReplyContext: &doc.ReplyContext{General: "gen-pr", SessionID: "s1", Repo: &repo, TaskID: task}}
	b, _ := json.Marshal(msg)
	os.WriteFile(filepath.Join(l.QueueState(layout.QMessages, layout.Pending), msg.ID+".json"), b, 0o600)

	out, code := runBin(t, bin, nil, "--base-dir", base, "--once")
	if code != 0 {
		t.Fatalf("envoy --once exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "Which branch?") {
		t.Errorf("console output lacks the question:\n%s", out)
	}
	logb, _ := os.ReadFile(l.EnvoyConsoleLog())
	if !strings.Contains(string(logb), "#COPS human_input_request "+task) {
		t.Errorf("console log:\n%s", logb)
	}
	if _, err := os.Stat(filepath.Join(l.QueueState(layout.QMessages, layout.Sent), msg.ID+".json")); err != nil {
		t.Errorf("message not in sent/: %v", err)
	}

	out, code = runBin(t, bin, nil, "reply", "--base-dir", base, task, "use main")
	if code != 0 {
		t.Fatalf("envoy reply exit %d:\n%s", code, out)
	}
	ents, _ := os.ReadDir(l.QueueState(layout.QEvents, layout.Pending))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "evt-slack-reply-") {
		t.Fatalf("events = %v, want one evt-slack-reply-*", ents)
	}
	eb, _ := os.ReadFile(filepath.Join(l.QueueState(layout.QEvents, layout.Pending), ents[0].Name()))
	ev, err := schema.DecodeEvent(eb)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "slack.thread.reply" || ev.Priority != "high" || ev.Payload["text"] != "use main" {
		t.Errorf("event = %s", eb)
	}

	// Answered: a second reply has nothing to answer.
	out, code = runBin(t, bin, nil, "reply", "--base-dir", base, task, "again")
	if code == 0 || !strings.Contains(out, "not waiting") {
		t.Errorf("second reply: exit %d, output %q; want a clear refusal", code, out)
	}
	// A bad task id never becomes a path.
	if out, code = runBin(t, bin, nil, "reply", "--base-dir", base, "../x", "hi"); code == 0 || !strings.Contains(out, "invalid id") {
		t.Errorf("bad id: exit %d, output %q", code, out)
	}
}

func TestEnvoyBinary_AppTokenWithoutBotTokenIsConfigError(t *testing.T) {
	bin := buildEnvoy(t)
	out, code := runBin(t, bin, []string{"SLACK_APP_TOKEN=xapp-1"}, "--base-dir", t.TempDir(), "--once")
	if code != 2 || strings.Contains(out, "xapp-1") {
		t.Errorf("exit %d, output %q; want 2 without the token", code, out)
	}
}

// The daemon against the fake Slack, configured the normal way (envoy.yaml
// api_url + token env vars): a DM becomes an event, a message dropped into
// pending/ is posted at once (inotify), the heartbeat is fresh, SIGTERM
// exits 0.
func TestEnvoyBinary_DaemonAgainstFakeSlack(t *testing.T) {
	bin := buildEnvoy(t)
	fake := slackfake.New()
	defer fake.Close()
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	cfg := "slack:\n  api_url: " + fake.APIURL() + "\n  default_channel: COPS\n  allowed_users: [UALICE]\nintervals:\n  outbound_seconds: 60\n"
	os.WriteFile(l.ConfigFile("envoy.yaml"), []byte(cfg), 0o600)

	cmd := exec.Command(bin, "--base-dir", base)
	cmd.Env = append(os.Environ(), "SLACK_BOT_TOKEN=xoxb-secret-bot", "SLACK_APP_TOKEN=xapp-secret-app", "SLACK_DEFAULT_CHANNEL=")
	outPath := filepath.Join(t.TempDir(), "out")
	outF, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outF.Close()
	cmd.Stdout, cmd.Stderr = outF, outF
	out := fileString(outPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()

	if err = fake.WaitConnected(60 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	env, err := fake.PushMessage(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "review please", TS: "1700000000.000100"})
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitAck(env, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.QueueState(layout.QEvents, layout.Pending), "evt-slack-msg-1700000000-000100.json")); err != nil {
		t.Errorf("DM event not queued: %v", err)
	}

	task := "task-20261121-001"
	msg := doc.Message{ID: "msg-" + task + "-start", Type: doc.MessageThreadStart, TaskID: &task, Urgency: "normal",
		Content: "Reviewing", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending",
		SourceRef: &doc.SourceRef{Channel: "D1", TS: "1700000000.000100"}}
	b, _ := json.Marshal(msg)
	tmp := filepath.Join(l.QueueState(layout.QMessages, layout.Pending), ".tmp-test")
	os.WriteFile(tmp, b, 0o600)
	os.Rename(tmp, filepath.Join(l.QueueState(layout.QMessages, layout.Pending), msg.ID+".json"))
	// The outbound interval is 60 s: only the inotify wake-up can make this.
	calls, err := fake.WaitCalls("chat.postMessage", 1, 60*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if c := calls[0]; c.Form.Get("channel") != "D1" || c.Form.Get("thread_ts") != "1700000000.000100" || c.Token != "xoxb-secret-bot" {
		t.Errorf("post = %v", c.Form)
	}
	if _, err := os.Stat(l.Heartbeat(layout.RoleEnvoy)); err != nil {
		t.Errorf("no heartbeat: %v", err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("envoy did not exit after SIGTERM")
	}
	logs, _ := os.ReadFile(l.SystemLog())
	for _, secret := range []string{"xoxb-secret-bot", "xapp-secret-app", "review please"} {
		if strings.Contains(out.String(), secret) || strings.Contains(string(logs), secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}

// fileString reads a file on demand (the daemon's output).
type fileString string

func (f fileString) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

// `envoy dm` asks a kingdom without Slack something: the envoy itself admits
// the DM as the slack.channel.message a Slack DM would make (SPEC §10.15:
// only the envoy creates slack.* events), even with an empty allowlist.
func TestEnvoyBinary_ConsoleDMBecomesASlackDMEvent(t *testing.T) {
	bin := buildEnvoy(t)
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	out, code := runBin(t, bin, nil, "dm", "--base-dir", base, "what can you do?")
	if code != 0 || !strings.Contains(out, "slack.channel.message") {
		t.Fatalf("envoy dm exit %d:\n%s", code, out)
	}
	ents, _ := os.ReadDir(l.QueueState(layout.QEvents, layout.Pending))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "evt-slack-msg-") {
		t.Fatalf("events = %v, want one evt-slack-msg-*", ents)
	}
	eb, _ := os.ReadFile(filepath.Join(l.QueueState(layout.QEvents, layout.Pending), ents[0].Name()))
	ev, err := schema.DecodeEvent(eb)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "slack.channel.message" || ev.Source != doc.SourceSlack || ev.Payload["text"] != "what can you do?" ||
		ev.Payload["channel"] != "D-CONSOLE" || ev.Payload["user_id"] != "console" {
		t.Errorf("event = %s", eb)
	}
	if out, code = runBin(t, bin, nil, "dm", "--base-dir", base); code != 2 {
		t.Errorf("dm without text: exit %d, want 2 (usage)\n%s", code, out)
	}
}

// With the default envoy.yaml (none: no default channel) console mode
// prints the work of every source, and `envoy retry` sends a failed message
// again after validating its id.
func TestEnvoyBinary_ConsoleWithoutChannelAndRetry(t *testing.T) {
	bin := buildEnvoy(t)
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	task := "task-20261121-001"
	done := doc.FinalDone
	put := func(state string, m doc.Message, fields map[string]any) {
		b, _ := json.Marshal(m)
		var doc map[string]any
		json.Unmarshal(b, &doc)
		for k, v := range fields {
			doc[k] = v
		}
		b, _ = json.Marshal(doc)
		os.WriteFile(filepath.Join(l.QueueState(layout.QMessages, state), m.ID+".json"), b, 0o600)
	}
	put(layout.Pending, doc.Message{ID: "msg-" + task + "-start", Type: doc.MessageThreadStart, TaskID: &task,
		Urgency: "normal", Content: "🎯 Reviewing acme/web#7", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"}, nil)
	put(layout.Pending, doc.Message{ID: "msg-" + task + "-done", Type: doc.MessageNotification, TaskID: &task,
		Urgency: "normal", Content: "Review posted", CreatedAt: "2026-11-21T10:01:00Z", Status: "pending", Final: &done}, nil)
	put(layout.Failed, doc.Message{ID: "msg-20261121-long", Type: doc.MessageReport, Urgency: "normal",
		Content: "weekly report", CreatedAt: "2026-11-21T09:00:00Z", Status: "failed"}, map[string]any{"error": "msg_too_long"})

	out, code := runBin(t, bin, nil, "--base-dir", base, "--once")
	if code != 0 {
		t.Fatalf("envoy --once exit %d:\n%s", code, out)
	}
	logb, _ := os.ReadFile(l.EnvoyConsoleLog())
	for _, want := range []string{"🎯 Reviewing acme/web#7", "✅ Review posted"} {
		if !strings.Contains(string(logb), want) {
			t.Errorf("console log lacks %q:\n%s", want, logb)
		}
	}
	for _, id := range []string{"msg-" + task + "-start", "msg-" + task + "-done"} {
		if _, err := os.Stat(filepath.Join(l.QueueState(layout.QMessages, layout.Sent), id+".json")); err != nil {
			t.Errorf("%s not in sent/: %v", id, err)
		}
	}

	for _, bad := range []string{"../x", "a/b"} {
		if out, code := runBin(t, bin, nil, "retry", "--base-dir", base, bad); code != 2 {
			t.Errorf("retry %q: exit %d, want 2\n%s", bad, code, out)
		}
	}
	if out, code := runBin(t, bin, nil, "retry", "--base-dir", base, "msg-20261121-nope"); code == 0 || !strings.Contains(out, "no such message") {
		t.Errorf("retry of an unknown id: exit %d\n%s", code, out)
	}
	if out, code := runBin(t, bin, nil, "retry", "--base-dir", base, "msg-20261121-long"); code != 0 {
		t.Fatalf("retry: exit %d\n%s", code, out)
	}
	if out, code := runBin(t, bin, nil, "--base-dir", base, "--once"); code != 0 {
		t.Fatalf("envoy --once exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(l.QueueState(layout.QMessages, layout.Sent), "msg-20261121-long.json")); err != nil {
		t.Errorf("retried message not sent: %v", err)
	}
	if logb, _ := os.ReadFile(l.EnvoyConsoleLog()); !strings.Contains(string(logb), "weekly report") {
		t.Errorf("retried message not printed:\n%s", logb)
	}
}
