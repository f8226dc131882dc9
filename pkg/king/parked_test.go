package king

import (
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A task parked by an engine pause (pending, not_before at the reset, its
// engine paused) holds no max_soldiers slot: with max_soldiers 1 and one
// claude task waiting for its reset, codex's work is admitted. When the
// pause lifts it counts again.
func TestKing_TaskParkedByAPauseTakesNoSlot(t *testing.T) {
	f := newFixture(t, genPRIssues, genCodex)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.newKing()
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)
	reset := t0.Add(6 * time.Hour)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited",
		"error": "You've hit your limit", "resets_at": doc.FormatTime(reset)})
	f.tick()
	eq(t, "parked until the reset", f.task(layout.Pending, task1).NotBefore, doc.FormatTime(reset))

	f.event("evt-codex", "github.issue.opened", "normal")
	f.event("evt-claude", "github.pr.review_requested", "normal", withCreated(t0.Add(time.Second)))
	f.tick()
	// evt-codex takes the one slot; evt-claude waits for its engine.
	eqList(t, "still pending", f.ids(layout.QEvents, layout.Pending), "evt-claude")
	if n := len(f.ids(layout.QTasks, layout.Pending)); n != 2 {
		t.Fatalf("%d pending tasks, want the parked one and codex's", n)
	}

	// The pause lifted: the parked task counts again, nothing more fits.
	f.clk.Set(reset.Add(time.Second))
	f.event("evt-codex-2", "github.issue.opened", "normal", withCreated(t0.Add(2*time.Second)))
	f.tick()
	eqList(t, "held by max_soldiers", f.ids(layout.QEvents, layout.Pending), "evt-claude", "evt-codex-2")
}
