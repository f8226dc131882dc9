package king

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Poison in tasks/pending (a directory named x.json, a
// schema-invalid file) used to count as in flight forever and stall every
// dispatch once it filled max_soldiers. Admission counts valid tasks only,
// and the poison goes to rejected/ with a reason.
func TestKing_PoisonTasksNeverHoldAdmissionSlots(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 2
	pending := f.l.QueueState(layout.QTasks, layout.Pending)
	if err := os.Mkdir(filepath.Join(pending, "task-20261120-001.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(pending, "task-20261120-002.json"), map[string]any{"id": "task-20261120-002"})
	petitioning := f.l.QueueState(layout.QEvents, layout.Petitioning)
	if err := os.Mkdir(filepath.Join(petitioning, "evt-dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	f.event("evt-1", "github.issue.assigned", "normal")
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	rej := f.l.QueueState(layout.QTasks, layout.Rejected)
	for _, p := range []string{
		filepath.Join(rej, "task-20261120-001.json.reason"),
		filepath.Join(rej, "task-20261120-002.json.reason"),
		filepath.Join(f.l.QueueState(layout.QEvents, layout.Rejected), "evt-dir.json.reason"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("poison not rejected with a reason: %v", err)
		}
	}
}
