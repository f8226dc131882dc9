package king

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestKing_TasksOfAnUninstalledGeneralFailAfterGrace(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Concurrency.MaxSoldiers = 1
	f.newKing()
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	eqList(t, "pending", f.ids(layout.QTasks, layout.Pending), task1)
	// gen-pr is uninstalled; its task would hold the only slot forever.
	if err := os.Remove(f.l.GeneralManifest("gen-pr")); err != nil {
		t.Fatal(err)
	}
	f.tick() // the first scan that sees the general gone
	f.clk.Advance(OrphanGrace - time.Minute)
	f.tick()
	eqList(t, "still pending within the grace", f.ids(layout.QTasks, layout.Pending), task1)
	f.clk.Advance(2 * time.Minute)
	f.tick()
	eqList(t, "completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "event completed", f.ids(layout.QEvents, layout.Completed), "evt-1")
	if m := f.message("msg-" + task1 + "-failed"); m == nil {
		t.Fatal("no ❌ notification")
	}
	if n := len(f.internal("task.failed")); n != 1 {
		t.Fatalf("task.failed events = %d, want 1", n)
	}
	// A reinstalled general keeps new tasks: nothing else is touched.
	f.writeManifest(genPR)
	f.event("evt-2", "github.pr.review_requested", "normal")
	f.tick()
	f.clk.Advance(time.Hour)
	f.tick()
	if n := len(f.ids(layout.QTasks, layout.Pending)); n != 1 {
		t.Fatalf("pending = %d, want the new task kept", n)
	}
}
