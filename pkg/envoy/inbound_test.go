package envoy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

const wait = 60 * time.Second

func (h *harness) push(m slackfake.Msg) string {
	h.t.Helper()
	env, err := h.fake.PushMessage(m)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.fake.WaitAck(env, wait); err != nil {
		h.t.Fatal(err)
	}
	return env
}

func TestInbound_DMBecomesEventWithReaction(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "status please", TS: "1700000000.000200"})
	evs := h.waitEvents(1)
	ev := evs["evt-slack-msg-1700000000-000200"]
	if ev == nil {
		t.Fatalf("events = %v, want evt-slack-msg-1700000000-000200", evs)
	}
	if ev.Type != EventChannelMessage || ev.Source != "slack" || ev.Priority != "normal" {
		t.Errorf("event = %+v", ev)
	}
	want := map[string]any{"text": "status please", "user_id": "UALICE", "channel": "D1", "ts": "1700000000.000200", "thread_ts": nil}
	for k, v := range want {
		if ev.Payload[k] != v {
			t.Errorf("payload[%s] = %v, want %v", k, ev.Payload[k], v)
		}
	}
	r, err := h.fake.WaitCalls("reactions.add", 1, wait)
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Form.Get("name") != ReactionReceived || r[0].Form.Get("channel") != "D1" || r[0].Form.Get("timestamp") != "1700000000.000200" {
		t.Errorf("reaction = %v, want :eyes: on the DM", r[0].Form)
	}
	if d := h.internal("event.detected"); len(d) != 1 || d[0]["event_id"] != ev.ID {
		t.Errorf("event.detected = %v", d)
	}
}

func TestInbound_MentionAndIgnoredMessages(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UBOT", Text: "my own echo", TS: "1700000000.000100"})
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UOTHERBOT", BotID: "B9", Text: "bot", TS: "1700000000.000101"})
	h.push(slackfake.Msg{Channel: "C1", ChannelType: "channel", User: "UALICE", Text: "chatter", TS: "1700000000.000102"})
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", SubType: "message_changed", Text: "edit", TS: "1700000000.000103"})
	h.push(slackfake.Msg{Type: "app_mention", Channel: "C1", User: "UALICE", Text: "<@UBOT> review acme/web#3", TS: "1700000000.000104"})
	evs := h.waitEvents(1)
	if len(evs) != 1 || evs["evt-slack-mention-1700000000-000104"] == nil {
		t.Fatalf("events = %v, want only the mention", keys(evs))
	}
	if ev := evs["evt-slack-mention-1700000000-000104"]; ev.Type != EventAppMention {
		t.Errorf("type = %q", ev.Type)
	}
}

func TestInbound_RedeliveryCreatesOneEvent(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	m := slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "hi", TS: "1700000000.000300", EventID: "Ev42"}
	h.push(m)
	env, err := h.fake.PushMessageRetry(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.fake.WaitAck(env, wait); err != nil {
		t.Fatalf("the redelivered envelope must be acked too: %v", err)
	}
	// And once more with a fresh event_id but the same message (after a
	// restart the in-memory dedupe is empty; the admitter still refuses).
	m.EventID = "Ev43"
	h.push(m)
	if evs := h.events(); len(evs) != 1 {
		t.Fatalf("events = %v, want exactly one", keys(evs))
	}
	if n := len(h.fake.Calls("reactions.add")); n > 1 {
		t.Errorf("reactions = %d, want one", n)
	}
}

func TestInbound_StrangerIsRefused(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	m := slackfake.Msg{Channel: "D9", ChannelType: "im", User: "USTRANGER", Text: "delete prod", TS: "1700000000.000400", EventID: "Ev7"}
	h.push(m)
	calls, err := h.fake.WaitCalls("chat.postMessage", 1, wait)
	if err != nil {
		t.Fatal(err)
	}
	// Slack redelivers the envelope: no second refusal.
	env, err := h.fake.PushMessageRetry(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.fake.WaitAck(env, wait); err != nil {
		t.Fatal(err)
	}
	// Envelopes are handled one after another, so a wrong refusal of the
	// redelivery would come before the later DM's.
	h.push(slackfake.Msg{Channel: "D9", ChannelType: "im", User: "USTRANGER", Text: "again", TS: "1700000000.000402"})
	if calls, err = h.fake.WaitCalls("chat.postMessage", 2, wait); err != nil {
		t.Fatal(err)
	}
	if got := calls[1].Form.Get("thread_ts"); got != "1700000000.000402" {
		t.Errorf("second refusal answers %q, want the later DM 1700000000.000402 (the redelivery was refused twice)", got)
	}
	if c := calls[0]; c.Form.Get("channel") != "D9" || c.Form.Get("text") != RefusalText {
		t.Errorf("refusal = %v", c.Form)
	}
	if evs := h.events(); len(evs) != 0 {
		t.Errorf("a stranger created events: %v", keys(evs))
	}
	if n := len(h.fake.Calls("reactions.add")); n != 0 {
		t.Errorf("reacted to a stranger's DM")
	}
}

func TestInbound_AllowAll(t *testing.T) {
	h := newHarness(t, setup{cfg: func(c *cfgEnvoy) { c.Slack.AllowAll = true; c.Slack.AllowedUsers = nil }})
	h.startSocket()
	h.push(slackfake.Msg{Channel: "D9", ChannelType: "im", User: "USTRANGER", Text: "hello", TS: "1700000000.000401"})
	h.waitEvents(1)
}

// needs_human round trip: question → awaited → reply in the thread → event.
func TestInbound_ReplyToAwaitedQuestion(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.put(message("msg-"+task+"-start", "thread_start", task))
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	thread := h.state().Awaiting[task].ThreadTS
	if thread == "" {
		t.Fatal("question not awaited")
	}
	// A reply elsewhere creates nothing.
	h.push(slackfake.Msg{Channel: "CDEFAULT", ChannelType: "channel", User: "UALICE", Text: "unrelated", TS: "1700000100.000001", ThreadTS: "1600000000.000001"})
	h.push(slackfake.Msg{Channel: "CDEFAULT", ChannelType: "channel", User: "UALICE", Text: "use main", TS: "1700000100.000100", ThreadTS: thread})
	evs := h.waitEvents(1)
	id := "evt-slack-reply-" + strings.ReplaceAll(thread, ".", "-") + "-1700000100-000100"
	ev := evs[id]
	if ev == nil {
		t.Fatalf("events = %v, want %s", keys(evs), id)
	}
	if ev.Type != EventThreadReply || ev.Priority != "high" || doc.Deref(ev.Repo) != "acme/web" {
		t.Errorf("event = %+v", ev)
	}
	rc, _ := ev.Payload["reply_context"].(map[string]any)
	if rc["task_id"] != task || rc["general"] != "gen-pr" || rc["session_id"] != "sess-1" || rc["thread_ts"] != thread {
		t.Errorf("reply_context = %v", rc)
	}
	if ev.Payload["thread_ts"] != thread || ev.Payload["text"] != "use main" {
		t.Errorf("payload = %v", ev.Payload)
	}
	if _, ok := h.state().Awaiting[task]; ok {
		t.Errorf("awaited entry kept after the first accepted reply")
	}
	if n := len(h.fake.Calls("reactions.add")); n != 0 {
		t.Errorf("reacted to a thread reply")
	}
}

// An answer that @mentions the bot arrives as message and as app_mention:
// one event, not a reply plus a new petition.
func TestInbound_MentionedAnswerInAwaitedThreadIsOneEvent(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.put(message("msg-"+task+"-start", "thread_start", task))
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	thread := h.state().Awaiting[task].ThreadTS
	ts := "1700000100.000300"
	h.push(slackfake.Msg{Channel: "CDEFAULT", ChannelType: "channel", User: "UALICE", Text: "<@UBOT> use main", TS: ts, ThreadTS: thread, EventID: "Ev-msg"})
	h.waitEvents(1)
	h.push(slackfake.Msg{Type: "app_mention", Channel: "CDEFAULT", User: "UALICE", Text: "<@UBOT> use main", TS: ts, ThreadTS: thread, EventID: "Ev-mention"})
	h.push(slackfake.Msg{Channel: "D9", ChannelType: "im", User: "UALICE", Text: "sync point", TS: "1700000100.000900"})
	evs := h.waitEvents(2)
	if len(evs) != 2 || evs["evt-slack-mention-1700000100-000300"] != nil {
		t.Fatalf("events = %v, want the reply and the later DM only", keys(evs))
	}
}

func TestInbound_TwoRepliesSameSecondInConversation(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	m := message("msg-20261121-001", "thread_reply", "")
	m["source_ref"] = map[string]any{"channel": "D1", "ts": "1700000000.000500"}
	m["track_conversation"] = map[string]any{"reply_context": replyContext(task), "ttl_seconds": 600}
	h.put(m)
	h.tick()
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "one", TS: "1700000200.000100", ThreadTS: "1700000000.000500"})
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "two", TS: "1700000200.000200", ThreadTS: "1700000000.000500"})
	evs := h.waitEvents(2)
	for _, id := range []string{"evt-slack-reply-1700000000-000500-1700000200-000100", "evt-slack-reply-1700000000-000500-1700000200-000200"} {
		if evs[id] == nil || evs[id].Type != EventThreadReply {
			t.Errorf("missing %s in %v", id, keys(evs))
		}
	}
}

func TestInbound_ConversationExpires(t *testing.T) {
	h := newHarness(t, setup{cfg: func(c *cfgEnvoy) { c.Intervals.ConversationTTLSeconds = 60 }})
	m := message("msg-20261121-001", "thread_reply", "")
	m["source_ref"] = map[string]any{"channel": "D1", "ts": "1700000000.000500"}
	m["track_conversation"] = map[string]any{"reply_context": replyContext(task), "ttl_seconds": 0} // 0 → config TTL
	h.put(m)
	h.tick()
	reply := func(ts string) {
		if _, err := h.e.handleInbound(context.Background(), Inbound{EventID: "Ev" + ts, Kind: "message", Channel: "D1", ChannelType: "im",
			User: "UALICE", Text: "more", TS: ts, ThreadTS: "1700000000.000500"}); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(59 * time.Second)
	reply("1700000300.000100")
	if n := len(h.events()); n != 1 {
		t.Fatalf("events within the TTL = %d, want 1", n)
	}
	h.clock.Advance(2 * time.Second)
	reply("1700000300.000200")
	if n := len(h.events()); n != 1 {
		t.Fatalf("events after the TTL = %d, want still 1", n)
	}
	h.tick()
	if n := len(h.state().Conversations); n != 0 {
		t.Errorf("expired conversation not pruned: %d left", n)
	}
}

func TestInbound_SocketDropReconnects(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "before", TS: "1700000000.000600"})
	opens := h.fake.Opens()
	if err := h.fake.Drop(wait); err != nil {
		t.Fatal(err)
	}
	if h.fake.Opens() <= opens {
		t.Errorf("no new apps.connections.open after the drop")
	}
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "after", TS: "1700000000.000700"})
	if err := h.fake.Disconnect(wait); err != nil {
		t.Fatal(err)
	}
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "after refresh", TS: "1700000000.000800"})
	evs := h.waitEvents(3)
	for _, id := range []string{"evt-slack-msg-1700000000-000600", "evt-slack-msg-1700000000-000700", "evt-slack-msg-1700000000-000800"} {
		if evs[id] == nil {
			t.Errorf("missing %s", id)
		}
	}
}

func TestConsole_OutboundAndReplyMatchTheRealPath(t *testing.T) {
	h := newHarness(t, setup{console: true})
	if !h.e.Console() {
		t.Fatal("want console mode without tokens")
	}
	h.put(message("msg-"+task+"-start", "thread_start", task))
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["content"] = "Which branch?"
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	log, err := os.ReadFile(h.l.EnvoyConsoleLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#CDEFAULT thread_start " + task, "content of msg-" + task + "-start", "human_input_request", "    Which branch?"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("console log lacks %q:\n%s", want, log)
		}
	}
	if !strings.Contains(h.stdout.String(), "Which branch?") {
		t.Errorf("console output not printed")
	}
	if s := h.msgState("msg-" + task + "-question"); s != layout.Sent {
		t.Errorf("message in %q, want sent", s)
	}
	if n := len(h.internal("message.sent")); n != 2 {
		t.Errorf("message.sent = %d, want 2", n)
	}
	aw := h.state().Awaiting[task]

	// The real path, in a copy of the state, for the same reply.
	real := newHarness(t, setup{})
	h.checkpoint()
	for _, p := range []string{h.l.EnvoyThreadMappings(), h.l.EnvoyAwaiting()} {
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(h.l.Base, p)
		os.WriteFile(filepath.Join(real.l.Base, rel), b, 0o600)
	}
	if _, err := real.e.handleInbound(context.Background(), Inbound{EventID: "Ev1", Kind: "message", Channel: aw.Channel, ChannelType: "channel",
		User: "UALICE", Text: "use main", TS: "1700000400.000100", ThreadTS: aw.ThreadTS}); err != nil {
		t.Fatal(err)
	}

	// envoy reply: an envelope in the console inbox, handled by the tick.
	path, err := QueueReply(h.l, task, "use main", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Same reply ts and user as the real one so the files can be compared.
	var r ConsoleReply
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &r)
	r.TS, r.User = "1700000400.000100", "UALICE"
	b, _ = json.Marshal(r)
	os.WriteFile(path, b, 0o600)
	h.tick()
	if _, err := os.Stat(path); err == nil {
		t.Errorf("envelope left in the console inbox")
	}
	name := "evt-slack-reply-" + strings.ReplaceAll(aw.ThreadTS, ".", "-") + "-1700000400-000100.json"
	got, err := os.ReadFile(filepath.Join(h.l.QueueState(layout.QEvents, layout.Pending), name))
	if err != nil {
		t.Fatalf("console reply produced no %s: %v", name, err)
	}
	want, err := os.ReadFile(filepath.Join(real.l.QueueState(layout.QEvents, layout.Pending), name))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("console reply event differs from the real one:\n got %s\nwant %s", got, want)
	}
	if _, ok := h.state().Awaiting[task]; ok {
		t.Errorf("awaited entry kept after the console reply")
	}

	// A reply for a task that awaits nothing is rejected with a reason.
	path, err = QueueReply(h.l, "task-20261121-099", "hello?", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.tick()
	if reason, ok := ReplyRejection(path); !ok || !strings.Contains(reason, "not waiting") {
		t.Errorf("rejection = %q, %v", reason, ok)
	}
}

func keys(m map[string]*doc.Event) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

type cfgEnvoy = config.Envoy

// A connection failure slack-go gives up on (a refused token) is retried by
// the envoy with growing waits until it connects.
func TestInbound_SocketRetriesRefusedConnection(t *testing.T) {
	h := newHarness(t, setup{})
	h.fake.Fail("apps.connections.open", 2, "invalid_auth")
	h.startSocket()
	if got := h.Sleeps(); len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Errorf("reconnect waits = %v, want [1s 2s]", got)
	}
	h.push(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "UALICE", Text: "hi", TS: "1700000000.000900"})
	h.waitEvents(1)
}
