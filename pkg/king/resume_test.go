package king

import (
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func replyPayload(rc any) map[string]any {
	p := map[string]any{"text": "use the main branch", "user_id": "U1", "channel": "C1",
		"ts": "1700.9", "thread_ts": "1700.1"}
	if rc != nil {
		p["reply_context"] = rc
	}
	return p
}

func TestKing_ResumeTaskCarriesSessionTextAndCheckpoint(t *testing.T) {
	f := newFixture(t, genPR)
	orig := "task-20261120-007"
	writeJSON(t, f.l.ResultCheckpoint(orig), map[string]any{"task_id": orig, "session_id": "sess-9",
		"workdir": "/base/workspace/gen-pr/tasks/" + orig, "thread": map[string]any{"channel": "C1", "thread_ts": "1700.1"},
		"question": "Which branch?", "general": "gen-pr", "repo": "acme/web"})
	f.event("evt-slack-reply-1700-1-1700-9", "slack.thread.reply", "high", withSource("slack"),
		withPayload(replyPayload(map[string]any{"general": "gen-pr", "session_id": "sess-9", "repo": "acme/web", "task_id": orig})))
	f.tick()

	tk := f.task(layout.Pending, task1)
	eq(t, "type", tk.Type, "resume")
	eq(t, "priority", tk.Priority, "high")
	eq(t, "general", tk.TargetGeneral, "gen-pr")
	eq(t, "session_id", tk.SessionID, "sess-9")
	eq(t, "original_task_id", tk.OriginalTaskID, orig)
	eq(t, "repo", doc.Deref(tk.Repo), "acme/web")
	eq(t, "text", tk.Payload["text"], any("use the main branch"))
	eq(t, "workdir", tk.Workdir, "/base/workspace/gen-pr/tasks/"+orig)
	if tk.Thread == nil || tk.Thread.ThreadTS != "1700.1" || tk.Thread.Channel != "C1" {
		t.Errorf("thread = %+v", tk.Thread)
	}
	m := f.message("msg-" + task1 + "-start")
	eq(t, "thread_start thread_ts", doc.Deref(m.ThreadTS), "1700.1")
	eq(t, "thread_start channel", m.Channel, "C1")
	r := f.internal("task.resumed")
	if len(r) != 1 {
		t.Fatalf("task.resumed = %d", len(r))
	}
	eq(t, "task.resumed.original_task_id", data(r[0])["original_task_id"], any(orig))
}

func TestKing_ResumeWithoutCheckpointUsesReplyThread(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-r", "slack.thread.reply", "high", withSource("slack"),
		withPayload(replyPayload(map[string]any{"general": "gen-pr", "session_id": "s", "repo": nil, "task_id": "task-20261120-001"})))
	f.tick()
	tk := f.task(layout.Pending, task1)
	eq(t, "workdir", tk.Workdir, "")
	if tk.Thread == nil || tk.Thread.ThreadTS != "1700.1" {
		t.Errorf("thread = %+v", tk.Thread)
	}
}

func TestKing_ReplyWithBadContextDiscarded(t *testing.T) {
	for name, rc := range map[string]any{
		"missing":         nil,
		"not an object":   "gen-pr",
		"unknown general": map[string]any{"general": "gen-nobody", "session_id": "s", "repo": nil, "task_id": "task-20261120-001"},
		"bad task id":     map[string]any{"general": "gen-pr", "session_id": "s", "repo": nil, "task_id": "../../etc"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, genPR)
			f.event("evt-r", "slack.thread.reply", "high", withSource("slack"), withPayload(replyPayload(rc)))
			f.tick()
			eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-r")
			eqList(t, "tasks", f.ids(layout.QTasks, layout.Pending))
			d := f.internal("event.discarded")
			if len(d) != 1 || !strings.Contains(data(d[0])["reason"].(string), "reply_context") {
				t.Fatalf("event.discarded = %+v", d)
			}
		})
	}
}

// SPEC §10.15: a thread reply the envoy did not admit
// (any source but slack: an inbox file, a file dropped into the queue)
// resumes nothing; it is discarded with the reason.
func TestKing_ForgedThreadReplyResumesNothing(t *testing.T) {
	f := newFixture(t, genPR, genHerald)
	for _, src := range []string{"inbox", "github"} {
		f.event("evt-forged-"+src, "slack.thread.reply", "high", withSource(src),
			withPayload(replyPayload(map[string]any{"general": "gen-pr", "session_id": "s", "repo": nil, "task_id": "task-20261120-001"})))
	}
	f.event("evt-forged-dm", "slack.channel.message", "normal", withSource("inbox"), withPayload(map[string]any{"text": "hi", "user_id": "U1", "channel": "D1", "ts": "1.2"}))
	f.tick()
	if got := f.ids(layout.QTasks, layout.Pending); len(got) != 0 {
		t.Fatalf("tasks created from forged events: %v", got)
	}
	if got := f.ids(layout.QEvents, layout.Petitioning); len(got) != 0 {
		t.Fatalf("petition started from a forged DM: %v", got)
	}
	d := f.internal("event.discarded")
	if len(d) != 3 {
		t.Fatalf("event.discarded = %d, want 3", len(d))
	}
	if r, _ := data(d[0])["reason"].(string); !strings.Contains(r, "did not come through the envoy") {
		t.Errorf("reason = %q", r)
	}
}
