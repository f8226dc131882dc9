package envoy

import (
	"context"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// When the work is done the final reaction replaces 👀 on the DM; a cancel
// keeps its ⛔ (no ❌ in front) and puts 🚫 on the DM.
func TestOutbound_FinalReactionReplacesEyes(t *testing.T) {
	for _, c := range []struct {
		name, final, content, reaction, prefix string
	}{
		{"done", "done", "gen-pr finished", ReactionDone, "✅ gen-pr finished"},
		{"cancelled", "failed", "⛔ gen-pr: task cancelled (cancelled by alice)", ReactionCancelled, "⛔ gen-pr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, setup{})
			start := message("msg-"+task+"-start", "thread_start", task)
			start["source_ref"] = map[string]any{"channel": "D42", "ts": "1700000001.000200"}
			h.put(start)
			h.tick()
			fin := message("msg-"+task+"-"+c.final, "notification", task)
			fin["final"], fin["content"] = c.final, c.content
			h.put(fin)
			h.tick()
			add := h.fake.Calls("reactions.add")
			if len(add) != 1 || add[0].Form.Get("name") != c.reaction {
				t.Fatalf("reactions added %+v, want %s", add, c.reaction)
			}
			rm := h.fake.Calls("reactions.remove")
			if len(rm) != 1 || rm[0].Form.Get("name") != ReactionReceived || rm[0].Form.Get("channel") != "D42" || rm[0].Form.Get("timestamp") != "1700000001.000200" {
				t.Fatalf("reactions removed %+v, want :eyes: off the DM", rm)
			}
			posts := h.fake.Calls("chat.postMessage")
			if got := posts[len(posts)-1].Form.Get("text"); !strings.HasPrefix(got, c.prefix) {
				t.Errorf("text %q, want prefix %q", got, c.prefix)
			}
		})
	}
}

func TestOutbound_UrgencyIsShown(t *testing.T) {
	h := newHarness(t, setup{})
	for id, u := range map[string]string{"msg-a-urgent": "urgent", "msg-b-high": "high", "msg-c-normal": "normal"} {
		m := message(id, "notification", "")
		m["urgency"], m["content"] = u, "king heartbeat missing"
		h.put(m)
	}
	q := message("msg-d-question", "human_input_request", task)
	q["urgency"], q["content"] = "high", "❓ which branch?"
	h.put(q)
	h.tick()
	got := map[string]bool{}
	for _, c := range h.fake.Calls("chat.postMessage") {
		got[c.Form.Get("text")] = true
	}
	for _, want := range []string{"🚨 *URGENT* king heartbeat missing", "❗ king heartbeat missing", "king heartbeat missing", "❓ which branch?"} {
		if !got[want] {
			t.Errorf("no post %q in %v", want, got)
		}
	}
}

func TestConsole_ChannelNamesHaveOneHash(t *testing.T) {
	h := newHarness(t, setup{console: true, cfg: func(c *config.Envoy) { c.Slack.DefaultChannel = "#ops" }})
	m := message("msg-x-1", "notification", "")
	h.put(m)
	h.tick()
	out := h.stdout.String()
	if strings.Contains(out, "##") || !strings.Contains(out, "#ops notification") {
		t.Fatalf("console output:\n%s", out)
	}
}

// A conversation kept for a user continues only with that user's replies.
func TestInbound_ConversationContinuesWithItsUserOnly(t *testing.T) {
	h := newHarness(t, setup{cfg: func(c *config.Envoy) { c.Slack.AllowedUsers = []string{"UALICE", "UBOB"} }})
	m := message("msg-20261121-001", "thread_reply", "")
	m["source_ref"] = map[string]any{"channel": "D1", "ts": "1700000000.000500"}
	m["track_conversation"] = map[string]any{"reply_context": replyContext(task), "ttl_seconds": 0, "user_id": "UALICE"}
	h.put(m)
	h.tick()
	if c := h.state().Conversations["D1/1700000000.000500"]; c.UserID != "UALICE" {
		t.Fatalf("conversation %+v, want it kept for UALICE", c)
	}
	reply := func(user, ts string) {
		if _, err := h.e.handleInbound(context.Background(), Inbound{EventID: "Ev" + ts, Kind: "message", Channel: "D1", ChannelType: "im",
			User: user, Text: "more", TS: ts, ThreadTS: "1700000000.000500"}); err != nil {
			t.Fatal(err)
		}
	}
	reply("UBOB", "1700000300.000100")
	if n := len(h.events()); n != 0 {
		t.Fatalf("another user's reply made %d events", n)
	}
	reply("UALICE", "1700000300.000200")
	evs := h.events()
	ev := evs["evt-slack-reply-1700000000-000500-1700000300-000200"]
	if len(evs) != 1 || ev == nil || ev.Type != EventThreadReply || ev.Payload["reply_context"] == nil {
		t.Fatalf("events %v", keys(evs))
	}
}

// A direct answer to a DM (no task) takes 👀 off it too.
func TestOutbound_DirectAnswerTakesEyesOff(t *testing.T) {
	h := newHarness(t, setup{})
	m := message("msg-evt-slack-msg-1700000001-000200-reply", "thread_reply", "")
	m["source_ref"] = map[string]any{"channel": "D42", "ts": "1700000001.000200"}
	m["thread_ts"], m["channel"] = "1700000001.000200", "D42"
	h.put(m)
	h.tick()
	rm := h.fake.Calls("reactions.remove")
	if len(rm) != 1 || rm[0].Form.Get("name") != ReactionReceived || rm[0].Form.Get("timestamp") != "1700000001.000200" {
		t.Fatalf("reactions removed %+v", rm)
	}
}
