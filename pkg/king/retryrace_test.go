package king

import (
	"context"
	"time"

	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// claimingStore is a store where a general claims task the moment a
// committed transaction leaves it in pending/: the worst instant a real
// general's claim can land (issue 33, a retry with a backoff of 0).
type claimingStore struct {
	store.Store
	task    string
	armed   bool
	claimed bool
}

func (s *claimingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err != nil || !s.armed || s.claimed {
		return err
	}
	if d, gerr := s.Store.Get(ctx, layout.QTasks, s.task); gerr == nil && d.State == layout.Pending {
		if s.Store.Claim(ctx, layout.QTasks, layout.Pending, layout.InProgress, s.task, store.Claim{Holder: "test-host", Attempt: 1}) == nil {
			s.claimed = true
		}
	}
	return err
}

// A retry moves its task to pending/ in one transaction: a general that
// claims it at once (retry.backoff_seconds 0) keeps it, and the task is
// never lost between a put into pending/ and a removal from in_progress/.
func TestKing_RetryWithNoBackoffNeverLosesTheTaskToAClaim(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Retry.BackoffSeconds = 0
	cs := &claimingStore{Store: f.st, task: task1}
	f.st = cs
	f.newKing()
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)

	cs.armed = true
	f.finalResult(task1, map[string]any{"status": "failed", "error": "boom", "error_reason": "EngineError"})
	f.tick()
	if !cs.claimed {
		t.Fatal("the retry never left the task in pending/ for a general to claim")
	}
	eqList(t, "tasks/in_progress (the general's claim)", f.ids(layout.QTasks, layout.InProgress), task1)
	eqList(t, "tasks/pending", f.ids(layout.QTasks, layout.Pending))
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed))
	tk := f.task(layout.InProgress, task1)
	eq(t, "retry_count", tk.RetryCount, 1)
	eq(t, "status", tk.Status, "pending")
	f.tick()
	eqList(t, "tasks/in_progress after the next tick", f.ids(layout.QTasks, layout.InProgress), task1)
}

// The same race on PostgreSQL, where a put then a remove lost rows in a
// cluster: the retry's move is one transaction there too.
func TestPG_RetryWithNoBackoffNeverLosesTheTaskToAClaim(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	a.cfg.Retry.BackoffSeconds = 0
	cs := &claimingStore{Store: a.st}
	k, err := New(Options{
		Layout: a.l, Store: cs, Host: a.id, Config: a.cfg, Clock: clk, Location: time.UTC,
		Events:          eventlog.NewStoreEmitter(a.st, "king"),
		PetitionCommand: []string{a.l.Base + "/no-such-classifier"},
		Jitter:          func(d time.Duration) time.Duration { return d },
		Takeover:        time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.k = k
	a.lead()
	a.admit("evt-1", "github.pr.review_requested", "normal", t0, nil)
	a.tick()
	pend := a.docs(layout.QTasks, layout.Pending)
	if len(pend) != 1 {
		t.Fatalf("%d tasks dispatched, want 1", len(pend))
	}
	id := pend[0].ID
	if err := a.st.Claim(t.Context(), layout.QTasks, layout.Pending, layout.InProgress, id, store.Claim{Holder: a.id}); err != nil {
		t.Fatal(err)
	}
	if err := kv.PutJSON(t.Context(), kv.OnStore(a.st), kv.NSResults, id, map[string]any{"task_id": id, "status": "failed",
		"summary": "boom", "error": "boom", "error_reason": "EngineError", "general": "gen-pr", "duration_seconds": 1,
		"completed_at": doc.FormatTime(t0), "retry_count": 0}); err != nil {
		t.Fatal(err)
	}
	cs.task, cs.armed = id, true
	a.tick()
	if !cs.claimed {
		t.Fatal("the retry never left the task in pending/ for a general to claim")
	}
	d, err := a.st.Get(t.Context(), layout.QTasks, id)
	if err != nil {
		t.Fatalf("the retried task is gone: %v", err)
	}
	eq(t, "state (the general's claim)", d.State, layout.InProgress)
	eq(t, "retry_count", a.task(id).RetryCount, 1)
}
