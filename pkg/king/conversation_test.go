package king

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A result that keeps the conversation puts track_conversation on the ✅
// message: the reply context to resume (session, kept workdir) and the user
// whose follow-ups continue it. A follow-up carrying that context resumes in
// the kept workdir.
func TestKing_KeptConversationTravelsOnTheDoneMessageAndBack(t *testing.T) {
	f := newFixture(t, genHerald)
	f.event("evt-dm", "slack.channel.message", "normal", withSource("slack"),
		withPayload(map[string]any{"text": "hi", "user_id": "UALICE", "channel": "D1", "ts": "1700.1", "thread_ts": nil}))
	f.cfg.Petition.Enabled = false
	f.newKing()
	f.tick()
	f.claim(task1)
	wd := f.l.TaskDir("gen-herald", task1) + "/repo"
	f.finalResult(task1, map[string]any{"status": "success", "general": "gen-herald", "session_id": "sess-1",
		"track_conversation": true, "workdir": wd})
	f.tick()

	m := f.message("msg-" + task1 + "-done")
	tc := m.TrackConversation
	if tc == nil {
		t.Fatal("the done message does not keep the conversation")
	}
	eq(t, "user_id", tc.UserID, "UALICE")
	eq(t, "general", tc.ReplyContext.General, "gen-herald")
	eq(t, "task_id", tc.ReplyContext.TaskID, task1)
	eq(t, "session_id", tc.ReplyContext.SessionID, "sess-1")
	eq(t, "workdir", tc.ReplyContext.Workdir, wd)

	f.event("evt-slack-reply-1700-1-1700-2", "slack.thread.reply", "high", withSource("slack"),
		withPayload(map[string]any{"text": "and?", "user_id": "UALICE", "channel": "D1", "ts": "1700.2", "thread_ts": "1700.1",
			"reply_context": map[string]any{"general": "gen-herald", "session_id": "sess-1", "repo": nil, "task_id": task1,
				"channel": "D1", "thread_ts": "1700.1", "workdir": wd}}))
	f.tick()
	follow := "task-20261121-002"
	tk := f.task(layout.Pending, follow)
	eq(t, "type", tk.Type, doc.TaskTypeResume)
	eq(t, "session", tk.SessionID, "sess-1")
	eq(t, "workdir", tk.Workdir, wd)
	if tk.Thread == nil || tk.Thread.ThreadTS != "1700.1" || tk.Thread.Channel != "D1" {
		t.Errorf("thread %+v", tk.Thread)
	}
}

func TestKing_NoConversationWithoutTheResultsAsking(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success"})
	f.tick()
	if m := f.message("msg-" + task1 + "-done"); m.TrackConversation != nil {
		t.Fatalf("track_conversation %+v", m.TrackConversation)
	}
}
