package king

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestKing_DispatchProducesTaskEventMessageAndInternalEvents(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-github-1-x", "github.pr.review_requested", "normal",
		withPayload(map[string]any{"subject_title": "Fix login", "subject_url": "https://x/pr/7", "pr_number": 7}))
	f.tick()

	eqList(t, "events/pending", f.ids(layout.QEvents, layout.Pending))
	eqList(t, "events/dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-github-1-x")
	eqList(t, "tasks/pending", f.ids(layout.QTasks, layout.Pending), "task-20261121-001")
	eqList(t, "messages/pending", f.ids(layout.QMessages, layout.Pending), "msg-task-20261121-001-start")

	ev, target := f.eventFile(layout.Dispatched, "evt-github-1-x")
	eq(t, "event.task_id", ev.TaskID, "task-20261121-001")
	eq(t, "event.status", ev.Status, "dispatched")
	eq(t, "event target_general", target, "gen-pr")

	tk := f.task(layout.Pending, "task-20261121-001")
	eq(t, "task.event_id", tk.EventID, "evt-github-1-x")
	eq(t, "task.target_general", tk.TargetGeneral, "gen-pr")
	eq(t, "task.type", tk.Type, "github.pr.review_requested")
	eq(t, "task.repo (manifest default)", doc.Deref(tk.Repo), "acme/web")
	eq(t, "task.retry_count", tk.RetryCount, 0)
	eq(t, "task.priority", tk.Priority, "normal")
	eq(t, "task.status", tk.Status, "pending")
	eq(t, "task.payload.pr_number", tk.Payload["pr_number"], any(float64(7)))

	m := f.message("msg-task-20261121-001-start")
	eq(t, "msg.type", m.Type, "thread_start")
	eq(t, "msg.task_id", doc.Deref(m.TaskID), "task-20261121-001")
	if m.SourceRef != nil {
		t.Errorf("github event has source_ref %+v", m.SourceRef)
	}
	if !strings.Contains(m.Content, "Fix login") {
		t.Errorf("thread_start content %q lacks the title", m.Content)
	}

	created, dispatched := f.internal("task.created"), f.internal("event.dispatched")
	if len(created) != 1 || len(dispatched) != 1 {
		t.Fatalf("task.created %d, event.dispatched %d; want 1 each", len(created), len(dispatched))
	}
	c := data(created[0])
	eq(t, "task.created.task_id", c["task_id"], any("task-20261121-001"))
	eq(t, "task.created.target_general", c["target_general"], any("gen-pr"))
	eq(t, "task.created.event_type", c["event_type"], any("github.pr.review_requested"))
	eq(t, "task.created.priority", c["priority"], any("normal"))
	d := data(dispatched[0])
	eq(t, "event.dispatched.event_id", d["event_id"], any("evt-github-1-x"))
	eq(t, "event.dispatched.task_id", d["task_id"], any("task-20261121-001"))
	eq(t, "actor", created[0].Actor, "king")

	// A second tick changes nothing.
	f.tick()
	eqList(t, "tasks/pending after 2nd tick", f.ids(layout.QTasks, layout.Pending), "task-20261121-001")
	if n := len(f.internal("task.created")); n != 1 {
		t.Errorf("task.created after 2nd tick = %d", n)
	}
}

func TestKing_EventRepoBeatsManifestDefault(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-a", "github.issue.assigned", "normal", withRepo("acme/api"))
	f.tick()
	eq(t, "repo", doc.Deref(f.task(layout.Pending, "task-20261121-001").Repo), "acme/api")
}

func TestKing_SlackEventThreadStartCarriesSourceRef(t *testing.T) {
	f := newFixture(t, genHerald)
	f.cfg.Petition.Enabled = false
	f.event("evt-slack-msg-1700000000-000200", "slack.channel.message", "normal", withSource("slack"),
		withPayload(map[string]any{"text": "status?", "user_id": "U1", "channel": "D123", "ts": "1700000000.000200", "thread_ts": nil}))
	f.tick()
	m := f.message("msg-task-20261121-001-start")
	if m.SourceRef == nil || m.SourceRef.Channel != "D123" || m.SourceRef.TS != "1700000000.000200" {
		t.Fatalf("source_ref = %+v, want {D123 1700000000.000200}", m.SourceRef)
	}
}

func TestKing_DispatchOrderPriorityThenAge(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.event("evt-old-low", "github.issue.a", "low", withCreated(t0.Add(-3*time.Hour)))
	f.event("evt-new-normal", "github.issue.a", "normal", withCreated(t0.Add(-1*time.Hour)))
	f.event("evt-old-normal", "github.issue.a", "normal", withCreated(t0.Add(-2*time.Hour)))
	f.event("evt-new-high", "github.issue.a", "high", withCreated(t0))
	var order []string
	for range 4 {
		f.tick()
		pend := f.ids(layout.QTasks, layout.Pending)
		if len(pend) != 1 {
			t.Fatalf("cap 1: %d tasks pending", len(pend))
		}
		order = append(order, f.task(layout.Pending, pend[0]).EventID)
		// The general takes it and finishes: the slot frees.
		os.Rename(filepath.Join(f.l.QueueState(layout.QTasks, layout.Pending), pend[0]+".json"),
			filepath.Join(f.l.QueueState(layout.QTasks, layout.Completed), pend[0]+".json"))
	}
	eqList(t, "dispatch order", order, "evt-new-high", "evt-old-normal", "evt-new-normal", "evt-old-low")
}

func TestKing_InvalidEventRejectedWithReason(t *testing.T) {
	f := newFixture(t, genPR)
	pend := f.l.QueueState(layout.QEvents, layout.Pending)
	os.WriteFile(filepath.Join(pend, "evt-bad.json"), []byte(`{"id":"evt-bad","type":"x"}`), 0o600)
	os.WriteFile(filepath.Join(pend, "evt-mismatch.json"), []byte(`{"id":"evt-other","type":"github.issue.a","source":"github","repo":null,"payload":{},"priority":"normal","created_at":"2026-11-21T10:00:00Z","status":"pending"}`), 0o600)
	f.event("evt-good", "github.issue.a", "normal")
	f.tick()
	eqList(t, "rejected", f.ids(layout.QEvents, layout.Rejected), "evt-bad", "evt-mismatch")
	for _, id := range []string{"evt-bad", "evt-mismatch"} {
		if _, err := os.Stat(filepath.Join(f.l.QueueState(layout.QEvents, layout.Rejected), id+".json.reason")); err != nil {
			t.Errorf("no reason beside rejected %s", id)
		}
	}
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-good")
}

func TestTaskSeq_PersistsResetsDailyAndGrowsPast999(t *testing.T) {
	l := layout.New(t.TempDir())
	st := openStore(t, l)
	path := l.KingTaskSeq()
	none := func(string) bool { return false }
	s := &taskSeq{kv: kv.OnStore(st)}
	day1 := time.Date(2026, 11, 21, 23, 59, 0, 0, time.UTC)
	for i, want := range []string{"task-20261121-001", "task-20261121-002"} {
		got, err := nextOne(s, day1, none)
		if err != nil || got != want {
			t.Fatalf("next #%d = %q, %v; want %s", i, got, err, want)
		}
	}
	s.release(t.Context())
	b, _ := os.ReadFile(path)
	eq(t, "task-seq file", strings.TrimSpace(string(b)), "20261121:2")

	// A restart continues from the file.
	s2 := &taskSeq{kv: kv.OnStore(st)}
	got, _ := nextOne(s2, day1, none)
	eq(t, "after restart", got, "task-20261121-003")
	// Next day resets.
	got, _ = nextOne(s2, day1.Add(time.Minute), none)
	eq(t, "next day", got, "task-20261122-001")

	os.WriteFile(path, []byte("20261122:999\n"), 0o600)
	s3 := &taskSeq{kv: kv.OnStore(st)}
	got, _ = nextOne(s3, day1.Add(time.Minute), none)
	eq(t, "past 999", got, "task-20261122-1000")

	// A lost sequence never reuses an existing task id.
	os.Remove(path)
	s4 := &taskSeq{kv: kv.OnStore(st)}
	got, _ = nextOne(s4, day1, func(id string) bool { return id <= "task-20261121-003" })
	eq(t, "skips existing", got, "task-20261121-004")
}
