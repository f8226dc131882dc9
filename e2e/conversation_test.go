package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// A DM answered by gen-herald keeps its conversation (SPEC §9.10): a
// follow-up in its thread from the same user is a slack.thread.reply with
// that conversation's context, which resumes the herald's session in its
// kept workdir and is answered in the same thread. Another user's message
// in the thread starts nothing. (Fake Slack over Socket Mode, real binaries.)
func TestConversation_FollowUpInTheDMThreadContinuesIt(t *testing.T) {
	// A short monitoring interval: a CPU spike of the loaded test machine
	// (orange: nothing admitted) passes within seconds, not 30.
	k := newConnectedKingdom(t, map[string]string{"config/chamberlain.yaml": calmThresholds})
	dmTS := "1795400100.000200"
	if _, err := k.slack.PushMessage(slackfake.Msg{Channel: "D0HUMAN", ChannelType: "im", User: "UHUMAN", Text: "what changed today?", TS: dmTS}); err != nil {
		t.Fatal(err)
	}
	evID := "evt-slack-msg-1795400100-000200"
	var first string
	k.Eventually("the herald's answer", 180*time.Second, func() bool {
		if tk := k.TaskForEvent(evID); tk != nil {
			first = tk.ID
			return k.Msgs.Exists(layout.Sent, "msg-"+first+"-done")
		}
		return false
	})
	res := k.Result(first)
	if res == nil || !res.TrackConversation || res.Workdir == "" {
		t.Fatalf("the herald's result does not keep the conversation: %+v", res)
	}
	if _, err := os.Stat(res.Workdir); err != nil {
		t.Fatalf("the conversation's workdir was not kept: %v", err)
	}
	// The soldier chooses the session id (SPEC §10.5); the follow-up must
	// resume exactly that one.
	sess := res.SessionID
	if sess == "" {
		t.Fatalf("the herald's result has no session id: %+v", res)
	}

	// Someone else in the thread: not this conversation.
	if _, err := k.slack.PushMessage(slackfake.Msg{Channel: "D0HUMAN", ChannelType: "im", User: "UOTHER", Text: "me too", TS: "1795400100.000300", ThreadTS: dmTS}); err != nil {
		t.Fatal(err)
	}
	// The same user follows up.
	if _, err := k.slack.PushMessage(slackfake.Msg{Channel: "D0HUMAN", ChannelType: "im", User: "UHUMAN", Text: "and yesterday?", TS: "1795400100.000400", ThreadTS: dmTS}); err != nil {
		t.Fatal(err)
	}
	replyID := "evt-slack-reply-1795400100-000200-1795400100-000400"
	var second string
	k.Eventually("the follow-up's answer", 180*time.Second, func() bool {
		if tk := k.TaskForEvent(replyID); tk != nil {
			second = tk.ID
			return k.Msgs.Exists(layout.Sent, "msg-"+second+"-done")
		}
		return false
	})
	b, err := k.Events.Read(layout.Completed, replyID)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := schema.DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := ev.Payload["reply_context"].(map[string]any)
	if ev.Type != "slack.thread.reply" || rc["task_id"] != first || rc["general"] != "gen-herald" || rc["session_id"] != sess {
		t.Fatalf("follow-up event %s with reply_context %v", ev.Type, rc)
	}
	tk := k.TaskForEvent(replyID)
	if tk.Type != doc.TaskTypeResume || tk.TargetGeneral != "gen-herald" || tk.SessionID != sess {
		t.Fatalf("follow-up task %+v", tk)
	}
	var call struct {
		Resume string `json:"resume"`
		Cwd    string `json:"cwd"`
	}
	cb, err := os.ReadFile(filepath.Join(k.L.Base, "fake-calls", second+"-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(cb, &call)
	if call.Resume != sess || call.Cwd != res.Workdir {
		t.Fatalf("follow-up ran with resume %q in %q, want %s in %q", call.Resume, call.Cwd, sess, res.Workdir)
	}
	var answered bool
	for _, p := range k.posts("D0HUMAN", dmTS) {
		answered = answered || strings.Contains(p.Form.Get("text"), "resumed "+first)
	}
	if !answered {
		t.Fatal("the follow-up's answer is not in the DM's thread")
	}
	if k.Events.Exists(layout.Pending, "evt-slack-reply-1795400100-000200-1795400100-000300") || k.TaskForEvent("evt-slack-reply-1795400100-000200-1795400100-000300") != nil {
		t.Fatal("another user's message in the thread continued the conversation")
	}
	if _, found := k.Events.Find("evt-slack-reply-1795400100-000200-1795400100-000300"); found {
		t.Fatal("another user's message in the thread became an event")
	}
}
