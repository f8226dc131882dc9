package envoy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func noDefaultChannel(c *config.Envoy) { c.Slack.DefaultChannel = "" }

// Console mode with no default channel (the default envoy.yaml) prints the
// 🎯/✅/❌ of work that did not come from Slack (inbox, GitHub, Jira)
// instead of failing "no channel", each task's messages in one thread.
func TestConsole_PrintsEveryMessageWithoutAChannel(t *testing.T) {
	h := newHarness(t, setup{console: true, cfg: noDefaultChannel})
	done, failed := "done", "failed"
	msgs := []map[string]any{
		message("msg-"+task+"-start", "thread_start", task),
		message("msg-"+task+"-update", "thread_update", task),
		message("msg-"+task+"-done", "notification", task),
		message("msg-task-20261121-002-start", "thread_start", "task-20261121-002"),
		message("msg-task-20261121-002-failed", "notification", "task-20261121-002"),
		message("msg-20261121-report", "report", ""),
	}
	msgs[2]["final"], msgs[4]["final"] = done, failed
	for _, m := range msgs {
		h.put(m)
	}
	h.tick()
	b, err := os.ReadFile(h.l.EnvoyConsoleLog())
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, m := range msgs {
		id := m["id"].(string)
		if s := h.msgState(id); s != layout.Sent {
			t.Errorf("%s in %q, want sent", id, s)
		}
		if !strings.Contains(log, "content of "+id) {
			t.Errorf("console log lacks %s", id)
		}
	}
	if !strings.Contains(log, "✅ content of msg-"+task+"-done") || !strings.Contains(log, "❌ content of msg-task-20261121-002-failed") {
		t.Errorf("finals without their emoji:\n%s", log)
	}
	// The update and the ✅ went into the thread the start opened.
	start := h.state().Mappings
	if len(start) != 0 {
		t.Errorf("mappings left after the finals: %v", start)
	}
	var startTS string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "(msg-"+task+"-start, ts ") {
			startTS = strings.TrimSuffix(line[strings.Index(line, ", ts ")+5:], ")")
		}
	}
	if startTS == "" || strings.Count(log, "#"+ConsoleChannel+" thread "+startTS+" ") != 2 {
		t.Errorf("update and final not in the start's thread %q:\n%s", startTS, log)
	}
}

// A message that failed "no channel" before console mode printed such
// messages is printed at the envoy's first tick.
func TestConsole_SendsOldNoChannelFailuresAgain(t *testing.T) {
	h := newHarness(t, setup{console: true, cfg: noDefaultChannel})
	m := message("msg-"+task+"-start", "thread_start", task)
	m["status"], m["error"] = "failed", ErrNoChannel.Error()
	other := message("msg-20261121-other", "report", "")
	other["status"], other["error"] = "failed", "post msg-20261121-other to C1: 3 attempts: msg_too_long"
	q := h.e.messages
	for _, d := range []map[string]any{m, other} {
		if err := q.Put(layout.Failed, d["id"].(string), d); err != nil {
			t.Fatal(err)
		}
	}
	h.tick()
	if s := h.msgState("msg-" + task + "-start"); s != layout.Sent {
		t.Fatalf("old no-channel failure in %q, want sent", s)
	}
	if s := h.msgState("msg-20261121-other"); s != layout.Failed {
		t.Errorf("a failure the config did not cause went back: %q", s)
	}
	var doc map[string]any
	if err := q.ReadJSON(layout.Sent, "msg-"+task+"-start", &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["error"]; ok || doc["status"] != "sent" {
		t.Errorf("sent file keeps its failure: %v", doc)
	}
}

// writeConfig writes envoy.yaml for h's envoy (pointed at the fake Slack)
// and makes the envoy watch it.
func writeConfig(t *testing.T, h *harness, extra string) {
	t.Helper()
	path := h.l.ConfigFile("envoy.yaml")
	y := "slack:\n  api_url: " + h.fake.APIURL() + "\n  allowed_users: [UALICE]\n" + extra
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	h.e.cfgPath = path
}

// A failure the config caused goes back to pending once per config change:
// a change that does not fix it fails it once more, and then it waits; the
// change that fixes it sends it. Other failures stay where they are.
func TestRetry_ConfigChangeSendsConfigFailuresOnce(t *testing.T) {
	h := newHarness(t, setup{cfg: noDefaultChannel})
	writeConfig(t, h, "retry:\n  max_attempts: 1\n")
	noChan := "msg-" + task + "-start"
	tooLong := "msg-20261121-long"
	h.put(message(noChan, "thread_start", task))
	long := message(tooLong, "report", "")
	long["channel"] = "COPS"
	h.put(long)
	h.fake.Fail("chat.postMessage", 1, "msg_too_long")
	h.tick()
	for _, id := range []string{noChan, tooLong} {
		if s := h.msgState(id); s != layout.Failed {
			t.Fatalf("%s in %q, want failed", id, s)
		}
	}
	retried := func() int { return len(h.internal("message.retried")) }

	// A change that does not give a channel: one more try, then it waits.
	writeConfig(t, h, "retry:\n  max_attempts: 1\nintervals:\n  conversation_ttl_seconds: 600\n")
	h.tick()
	h.tick()
	if n := retried(); n != 1 {
		t.Errorf("retries after a change that fixes nothing = %d, want 1", n)
	}
	if s := h.msgState(noChan); s != layout.Failed {
		t.Fatalf("%s in %q, want failed again", noChan, s)
	}

	writeConfig(t, h, "  default_channel: CFIXED\nretry:\n  max_attempts: 1\n")
	h.tick()
	if s := h.msgState(noChan); s != layout.Sent {
		t.Fatalf("%s in %q after the default channel was set, want sent", noChan, s)
	}
	calls := h.fake.Calls("chat.postMessage")
	if got := calls[len(calls)-1].Form.Get("channel"); got != "CFIXED" {
		t.Errorf("sent to %q, want CFIXED", got)
	}
	if s := h.msgState(tooLong); s != layout.Failed {
		t.Errorf("%s (not the config's doing) in %q, want failed", tooLong, s)
	}
	if n := len(calls); n != 2 {
		t.Errorf("postMessage calls = %d, want 2 (msg_too_long once, the fixed message once)", n)
	}
}

// An envoy.yaml that no longer loads keeps the running config.
func TestRetry_BrokenConfigKeepsTheRunningOne(t *testing.T) {
	h := newHarness(t, setup{})
	writeConfig(t, h, "  default_channel: CFIRST\n")
	h.tick()
	writeConfig(t, h, "  default_channel: [not a string\n")
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	calls := h.fake.Calls("chat.postMessage")
	if len(calls) != 1 || calls[0].Form.Get("channel") != "CFIRST" {
		t.Errorf("posts = %v, want one to CFIRST", calls)
	}
}

// `envoy retry`: ids are validated before they touch a path, only a
// message in failed/ moves, and the message is sent again without its
// failure.
func TestRetryFailed_MovesOnlyAFailedMessage(t *testing.T) {
	h := newHarness(t, setup{cfg: func(c *config.Envoy) { c.Retry.MaxAttempts = 1 }})
	id := "msg-20261121-001"
	m := message(id, "report", "")
	m["channel"] = "CGONE"
	h.put(m)
	h.fake.Fail("chat.postMessage", 1, "channel_not_found")
	h.tick()
	var doc map[string]any
	q := h.e.messages
	if err := q.ReadJSON(layout.Failed, id, &doc); err != nil {
		t.Fatal(err)
	}
	if doc[configCauseField] == nil {
		t.Errorf("channel_not_found not marked as caused by the config: %v", doc)
	}
	outside := filepath.Join(t.TempDir(), "x")
	os.WriteFile(outside+".json", []byte("{}"), 0o600)
	for _, bad := range []string{"", "../" + filepath.Base(outside), "a/b", "msg-20261121-404"} {
		if err := RetryFailed(h.e.st.st, h.l, bad, nil); err == nil {
			t.Errorf("RetryFailed(%q) = nil, want an error", bad)
		}
	}
	if _, err := os.Stat(outside + ".json"); err != nil {
		t.Errorf("file outside the queue touched: %v", err)
	}
	if err := RetryFailed(h.e.st.st, h.l, id, h.e.em); err != nil {
		t.Fatal(err)
	}
	if s := h.msgState(id); s != layout.Pending {
		t.Fatalf("message in %q after retry, want pending", s)
	}
	if err := RetryFailed(h.e.st.st, h.l, id, nil); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Errorf("second retry = %v, want it named pending", err)
	}
	h.tick()
	doc = nil
	if err := q.ReadJSON(layout.Sent, id, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["error"]; ok {
		t.Errorf("sent file keeps the error: %v", doc)
	}
	if _, ok := doc[configCauseField]; ok {
		t.Errorf("sent file keeps the config cause: %v", doc)
	}
}
