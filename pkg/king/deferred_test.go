package king

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Deferred events are not read again while nothing that could admit them
// changed (issue #17). Replacing a deferred event's content with garbage
// proves it: a re-read would reject it. Once a slot frees, the queue is
// walked again in order, each deferred event read only while there is room.
func TestKing_DeferredEventsAreNotReReadUntilAdmissionChanges(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.event("evt-1", "github.issue.a", "normal", withCreated(t0.Add(-3)))
	f.event("evt-2", "github.issue.a", "normal", withCreated(t0.Add(-2)))
	f.event("evt-3", "github.issue.a", "normal", withCreated(t0.Add(-1)))
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	pend := f.l.QueueState(layout.QEvents, layout.Pending)
	if err := os.WriteFile(filepath.Join(pend, "evt-2.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.tick()
	eqList(t, "rejected while nothing changed", f.ids(layout.QEvents, layout.Rejected))
	eqList(t, "still pending", f.ids(layout.QEvents, layout.Pending), "evt-2", "evt-3")

	// A new event is still read (and deferred: the slot is taken).
	f.event("evt-4", "github.issue.a", "high")
	f.tick()
	eqList(t, "pending with the new one", f.ids(layout.QEvents, layout.Pending), "evt-2", "evt-3", "evt-4")

	// The slot frees: the walk admits the high-priority event first, and
	// with no room left reads no other deferred event (the garbage stays).
	free := func() {
		t.Helper()
		task := f.ids(layout.QTasks, layout.Pending)[0]
		if err := os.Rename(filepath.Join(f.l.QueueState(layout.QTasks, layout.Pending), task+".json"),
			filepath.Join(f.l.QueueState(layout.QTasks, layout.Completed), task+".json")); err != nil {
			t.Fatal(err)
		}
	}
	free()
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1", "evt-4")
	eqList(t, "rejected with no room left", f.ids(layout.QEvents, layout.Rejected))

	// The slot frees again: the walk reaches the garbage, rejects it and
	// admits the next event.
	free()
	f.tick()
	eqList(t, "rejected after the slot freed", f.ids(layout.QEvents, layout.Rejected), "evt-2")
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1", "evt-3", "evt-4")
}

// A final result frees its slot in the same tick that handles it: the
// next pending event is dispatched at once (issue #17).
func TestKing_AResultAdmitsTheNextEventInTheSameTick(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.event("evt-1", "github.issue.a", "normal", withCreated(t0.Add(-2)))
	f.event("evt-2", "github.issue.a", "normal", withCreated(t0.Add(-1)))
	f.tick()
	first := f.ids(layout.QTasks, layout.Pending)[0]
	f.claim(first)
	f.tick()
	eqList(t, "dispatched while the slot is taken", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	f.finalResult(first, map[string]any{"status": "success", "summary": "ok"})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), first)
	eq(t, "tasks pending after the one tick", len(f.ids(layout.QTasks, layout.Pending)), 1)
}
