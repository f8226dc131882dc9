package king

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A deferred event stays in pending/ and is judged afresh every tick: the
// king keeps no memory of past deferrals. Replacing a deferred event's
// content with garbage proves it: the very next tick reads it again and
// rejects it, though nothing that admission depends on changed. Once a
// slot frees, the next event in queue order is admitted.
func TestKing_DeferredEventsAreReadAgainEveryTick(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.event("evt-1", "github.issue.a", "normal", withCreated(t0.Add(-3)))
	f.event("evt-2", "github.issue.a", "normal", withCreated(t0.Add(-2)))
	f.event("evt-3", "github.issue.a", "normal", withCreated(t0.Add(-1)))
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	eqList(t, "deferred", f.ids(layout.QEvents, layout.Pending), "evt-2", "evt-3")

	pend := f.l.QueueState(layout.QEvents, layout.Pending)
	if err := os.WriteFile(filepath.Join(pend, "evt-2.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.tick()
	eqList(t, "rejected on the next tick", f.ids(layout.QEvents, layout.Rejected), "evt-2")
	eqList(t, "still deferred", f.ids(layout.QEvents, layout.Pending), "evt-3")

	// A high-priority event arriving later goes first once the slot frees.
	f.event("evt-4", "github.issue.a", "high")
	f.tick()
	eqList(t, "deferred with the new one", f.ids(layout.QEvents, layout.Pending), "evt-3", "evt-4")
	task := f.ids(layout.QTasks, layout.Pending)[0]
	if err := os.Rename(filepath.Join(f.l.QueueState(layout.QTasks, layout.Pending), task+".json"),
		filepath.Join(f.l.QueueState(layout.QTasks, layout.Completed), task+".json")); err != nil {
		t.Fatal(err)
	}
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1", "evt-4")
	eqList(t, "still deferred", f.ids(layout.QEvents, layout.Pending), "evt-3")
}

// A final result frees its slot in the same tick that handles it: the
// next pending event is dispatched at once.
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
