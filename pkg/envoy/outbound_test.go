package envoy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

const task = "task-20261121-001"

func TestOutbound_ThreadLifecycle(t *testing.T) {
	h := newHarness(t, setup{})

	h.put(message("msg-"+task+"-start", "thread_start", task))
	h.tick()
	calls := h.fake.Calls("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("postMessage calls = %d, want 1", len(calls))
	}
	parent := calls[0]
	if got := parent.Form.Get("channel"); got != "CDEFAULT" {
		t.Errorf("thread_start channel = %q, want the default CDEFAULT", got)
	}
	if parent.Form.Has("thread_ts") {
		t.Errorf("thread_start posted into a thread (%q), want a new parent", parent.Form.Get("thread_ts"))
	}
	if parent.Token != "xoxb-test-bot-token" {
		t.Errorf("bot token not presented")
	}
	mp, ok := h.state().Mappings[task]
	if !ok || mp.Channel != "CDEFAULT" || mp.ThreadTS == "" {
		t.Fatalf("mapping = %+v, %v; want CDEFAULT and the parent ts", mp, ok)
	}
	parentTS := mp.ThreadTS

	h.put(message("msg-"+task+"-update", "thread_update", task))
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["content"] = "Which branch?"
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	calls = h.fake.Calls("chat.postMessage")
	if len(calls) != 3 {
		t.Fatalf("postMessage calls = %d, want 3", len(calls))
	}
	for i, c := range calls[1:] {
		if c.Form.Get("thread_ts") != parentTS || c.Form.Get("channel") != "CDEFAULT" {
			t.Errorf("call %d went to %s/%s, want the task's thread CDEFAULT/%s", i+1, c.Form.Get("channel"), c.Form.Get("thread_ts"), parentTS)
		}
	}
	if got := calls[2].Form.Get("text"); got != "Which branch?" {
		t.Errorf("question text = %q", got)
	}
	aw, ok := h.state().Awaiting[task]
	if !ok || aw.ThreadTS != parentTS || aw.ReplyContext == nil || aw.ReplyContext.General != "gen-pr" {
		t.Fatalf("awaited = %+v, %v", aw, ok)
	}
	// State files are private (written at the end of a tick).
	h.checkpoint()
	for _, p := range []string{h.l.EnvoyThreadMappings(), h.l.EnvoyAwaiting()} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, fi.Mode().Perm())
		}
	}

	done := message("msg-"+task+"-done", "notification", task)
	done["content"] = "PR reviewed"
	done["final"] = "done"
	h.put(done)
	h.tick()
	calls = h.fake.Calls("chat.postMessage")
	last := calls[len(calls)-1]
	if last.Form.Get("thread_ts") != parentTS {
		t.Errorf("completion went to thread %q, want %q", last.Form.Get("thread_ts"), parentTS)
	}
	if got := last.Form.Get("text"); got != "✅ PR reviewed" {
		t.Errorf("completion text = %q, want the ✅ prefix", got)
	}
	st := h.state()
	if _, ok := st.Mappings[task]; ok {
		t.Errorf("mapping still present after completion")
	}
	if _, ok := st.Awaiting[task]; ok {
		t.Errorf("awaited entry still present after completion")
	}
	for _, id := range []string{"start", "update", "question", "done"} {
		if s := h.msgState("msg-" + task + "-" + id); s != layout.Sent {
			t.Errorf("msg %s in %q, want sent", id, s)
		}
	}
	sent := h.internal("message.sent")
	if len(sent) != 4 || sent[0]["msg_id"] != "msg-"+task+"-start" || sent[0]["task_id"] != task || sent[0]["channel"] != "CDEFAULT" {
		t.Errorf("message.sent events = %v", sent)
	}
}

func TestOutbound_DMParentAndFinalReaction(t *testing.T) {
	h := newHarness(t, setup{})
	start := message("msg-"+task+"-start", "thread_start", task)
	start["source_ref"] = map[string]any{"channel": "D42", "ts": "1700000001.000200"}
	h.put(start)
	h.tick()
	c := h.fake.Calls("chat.postMessage")[0]
	if c.Form.Get("channel") != "D42" || c.Form.Get("thread_ts") != "1700000001.000200" {
		t.Fatalf("thread_start with a source DM posted to %s/%s, want D42/1700000001.000200", c.Form.Get("channel"), c.Form.Get("thread_ts"))
	}
	if mp := h.state().Mappings[task]; mp.ThreadTS != "1700000001.000200" || mp.Channel != "D42" {
		t.Fatalf("mapping = %+v, want the DM as parent", mp)
	}
	fail := message("msg-"+task+"-failed", "notification", task)
	fail["final"] = "failed"
	h.put(fail)
	h.tick()
	r := h.fake.Calls("reactions.add")
	if len(r) != 1 || r[0].Form.Get("name") != ReactionFailed || r[0].Form.Get("channel") != "D42" || r[0].Form.Get("timestamp") != "1700000001.000200" {
		t.Fatalf("reactions = %+v, want :x: on the source DM", r)
	}
	if last := h.fake.Calls("chat.postMessage")[1]; !strings.HasPrefix(last.Form.Get("text"), "❌ ") || last.Form.Get("thread_ts") != "1700000001.000200" {
		t.Errorf("failure notification = %v", last.Form)
	}
}

func TestOutbound_ResumeThreadStartReusesThread(t *testing.T) {
	h := newHarness(t, setup{})
	resume := "task-20261121-002"
	m := message("msg-"+resume+"-start", "thread_start", resume)
	m["channel"] = "C7"
	m["thread_ts"] = "1700000005.000100"
	m["content"] = ""
	h.put(m)
	h.tick()
	if n := len(h.fake.Calls("chat.postMessage")); n != 0 {
		t.Fatalf("resume thread_start posted %d messages, want none (no new parent)", n)
	}
	if mp := h.state().Mappings[resume]; mp.Channel != "C7" || mp.ThreadTS != "1700000005.000100" {
		t.Fatalf("mapping = %+v, want the existing thread", mp)
	}
	if s := h.msgState("msg-" + resume + "-start"); s != layout.Sent {
		t.Errorf("message in %q, want sent", s)
	}
	h.put(message("msg-"+resume+"-done", "notification", resume))
	h.tick()
	c := h.fake.Calls("chat.postMessage")[0]
	if c.Form.Get("channel") != "C7" || c.Form.Get("thread_ts") != "1700000005.000100" {
		t.Errorf("notification went to %s/%s, want the resumed thread", c.Form.Get("channel"), c.Form.Get("thread_ts"))
	}
}

func TestOutbound_NotifyChannelProclamationReport(t *testing.T) {
	h := newHarness(t, setup{})
	h.put(message("msg-"+task+"-start", "thread_start", task))
	h.tick()
	parentTS := h.state().Mappings[task].ThreadTS

	n := message("msg-"+task+"-done", "notification", task)
	n["channel"] = "CNOTIFY" // notify_channel from the result
	n["final"] = "done"
	h.put(n)
	p := message("msg-"+task+"-proclamation", "notification", "proclamation-"+task)
	p["channel"] = "CTEAM"
	p["content"] = "PR News"
	h.put(p)
	r := message("msg-20261121-007", "report", "")
	h.put(r)
	h.tick()
	calls := h.fake.Calls("chat.postMessage")[1:]
	if len(calls) != 3 {
		t.Fatalf("calls = %d, want 3", len(calls))
	}
	want := []struct{ ch, text string }{{"CNOTIFY", "✅ content of msg-" + task + "-done"}, {"CTEAM", "PR News"}, {"CDEFAULT", "content of msg-20261121-007"}}
	for i, w := range want {
		c := calls[i]
		if c.Form.Get("channel") != w.ch || c.Form.Get("text") != w.text || c.Form.Has("thread_ts") {
			t.Errorf("call %d = channel %q text %q thread %q; want %q %q top level (parent was %s)",
				i, c.Form.Get("channel"), c.Form.Get("text"), c.Form.Get("thread_ts"), w.ch, w.text, parentTS)
		}
	}
}

func TestOutbound_DefaultChannelFromEnv(t *testing.T) {
	h := newHarness(t, setup{})
	t.Setenv(config.EnvDefaultChannel, "CENV")
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if got := h.fake.Calls("chat.postMessage")[0].Form.Get("channel"); got != "CENV" {
		t.Errorf("channel = %q, want SLACK_DEFAULT_CHANNEL's CENV", got)
	}
}

func TestOutbound_RateLimitHonorsRetryAfter(t *testing.T) {
	h := newHarness(t, setup{})
	h.fake.RateLimit("chat.postMessage", 1, 7)
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if got := h.Sleeps(); len(got) != 1 || got[0] != 7*time.Second {
		t.Errorf("waits = %v, want [7s] from Retry-After", got)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 2 {
		t.Errorf("attempts = %d, want 2", n)
	}
	if s := h.msgState("msg-20261121-001"); s != layout.Sent {
		t.Errorf("message in %q, want sent", s)
	}
}

// Rate limits are "later", not failures: a burst of 429s does not use up a
// message's three attempts.
func TestOutbound_RateLimitsDoNotUseUpAttempts(t *testing.T) {
	h := newHarness(t, setup{})
	h.fake.RateLimit("chat.postMessage", 4, 2)
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if s := h.msgState("msg-20261121-001"); s != layout.Sent {
		t.Fatalf("message in %q after four 429s, want sent", s)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 5 {
		t.Errorf("calls = %d, want 5", n)
	}
}

func TestOutbound_ThreeFailuresGoToFailed(t *testing.T) {
	h := newHarness(t, setup{})
	h.fake.Fail("chat.postMessage", 3, "channel_not_found")
	h.put(message("msg-20261121-001", "report", ""))
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	if s := h.msgState("msg-20261121-001"); s != layout.Failed {
		t.Fatalf("message in %q, want failed", s)
	}
	if s := h.msgState("msg-20261121-002"); s != layout.Sent {
		t.Errorf("the next message in %q, want sent (a failure never blocks the queue)", s)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 4 {
		t.Errorf("postMessage calls = %d, want 3 attempts + 1", n)
	}
	if got := h.Sleeps(); len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Errorf("backoff = %v, want [1s 2s]", got)
	}
	f := h.internal("message.failed")
	if len(f) != 1 || f[0]["msg_id"] != "msg-20261121-001" || !strings.Contains(f[0]["error"].(string), "channel_not_found") {
		t.Errorf("message.failed = %v", f)
	}
	b, _ := os.ReadFile(h.l.QueueState(layout.QMessages, layout.Failed) + "/msg-20261121-001.json")
	if !strings.Contains(string(b), "channel_not_found") || !strings.Contains(string(b), `"status": "failed"`) {
		t.Errorf("failed file does not carry the error and status:\n%s", b)
	}
}

func TestOutbound_InvalidMessageRejected(t *testing.T) {
	h := newHarness(t, setup{})
	bad := message("msg-20261121-001", "shout", "")
	h.put(bad)
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	if s := h.msgState("msg-20261121-001"); s != layout.Rejected {
		t.Fatalf("invalid message in %q, want rejected", s)
	}
	if _, err := os.Stat(h.l.QueueState(layout.QMessages, layout.Rejected) + "/msg-20261121-001.json.reason"); err != nil {
		t.Errorf("no reason file: %v", err)
	}
	if s := h.msgState("msg-20261121-002"); s != layout.Sent {
		t.Errorf("valid message in %q, want sent", s)
	}
}

func TestOutbound_NoChannelFails(t *testing.T) {
	h := newHarness(t, setup{cfg: func(c *config.Envoy) { c.Slack.DefaultChannel = "" }})
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if s := h.msgState("msg-20261121-001"); s != layout.Failed {
		t.Fatalf("message in %q, want failed", s)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 0 {
		t.Errorf("posted %d times without a channel", n)
	}
}

// A crash after Slack accepted a message but before it reached sent/ must
// not post it twice: the delivery record finishes the job.
func TestOutbound_DeliveryRecordPreventsDoublePost(t *testing.T) {
	h := newHarness(t, setup{})
	id := "msg-" + task + "-start"
	if err := h.e.st.update(context.Background(), func(s *State) error {
		s.Deliveries[id] = Delivery{Channel: "CDEFAULT", TS: "1700000009.000100", At: "2026-11-21T10:00:00Z"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.put(message(id, "thread_start", task))
	h.tick()
	if n := len(h.fake.Calls("chat.postMessage")); n != 0 {
		t.Fatalf("posted %d times, want 0 (already delivered)", n)
	}
	if mp := h.state().Mappings[task]; mp.ThreadTS != "1700000009.000100" {
		t.Errorf("mapping = %+v, want the recorded ts", mp)
	}
	if s := h.msgState(id); s != layout.Sent {
		t.Errorf("message in %q, want sent", s)
	}
	h.tick()
	if _, ok := h.state().Deliveries[id]; ok {
		t.Errorf("delivery record kept after the message reached sent/")
	}
}

// A Retry-After too long to wait inside a tick holds every send until then,
// without using up the message's attempts.
func TestOutbound_LongRateLimitHoldsSends(t *testing.T) {
	h := newHarness(t, setup{})
	h.fake.RateLimit("chat.postMessage", 1, 120)
	h.put(message("msg-20261121-001", "report", ""))
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	if n := len(h.fake.Calls("chat.postMessage")); n != 1 {
		t.Fatalf("calls = %d, want 1 (then hold)", n)
	}
	if got := h.Sleeps(); len(got) != 0 {
		t.Errorf("slept %v inside the tick", got)
	}
	h.clock.Advance(119 * time.Second)
	h.tick()
	if n := len(h.fake.Calls("chat.postMessage")); n != 1 {
		t.Fatalf("calls = %d before Retry-After passed, want 1", n)
	}
	h.clock.Advance(2 * time.Second)
	h.tick()
	for _, id := range []string{"msg-20261121-001", "msg-20261121-002"} {
		if s := h.msgState(id); s != layout.Sent {
			t.Errorf("%s in %q, want sent", id, s)
		}
	}
}
