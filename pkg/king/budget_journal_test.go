package king

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// The ledger gets one entry per attempt, and a past day's ledger stays as
// it was, still read for its figures.
func TestKing_CostLedgerAppendedAndPastDaysKept(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "cost_usd": 0.5, "soldier_id": "soldier-1-a"})
	f.tick()
	today := spend.Date(f.clk.Now())
	eq(t, "today's attempts", f.ledger(today).Summary().Totals.Attempts, 1)
	eq(t, "today's cost", f.ledger(today).Summary().Totals.CostUSD, 0.5)

	f.clk.Advance(24 * time.Hour)
	f.newKing()
	f.tick()
	eq(t, "yesterday's cost", f.ledger(today).Summary().Totals.CostUSD, 0.5)
}

// A damaged ledger is not moved aside and counted from zero: what parses
// counts, and while the day's figure is unknown no task starts.
func TestKing_DamagedLedgerHoldsAdmission(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Budget = spend.Budget{DailyUSD: fptr(1.00)}
	f.newKing()
	today := spend.Date(f.clk.Now())
	f.spent(today, "task-20261121-900#0#s", spend.Entry{Task: "task-20261121-900", General: "gen-pr", Engine: "claude", CostUSD: fptr(0.5)})
	ns, err := spend.Namespace(today)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte(`{"key":"task-20261121-901#0#s","task_id":"task-20261121-901","cost_u` + "\x00\x00garbage\n")
	st := kv.OnStore(f.st)
	if err := st.Put(t.Context(), ns, "damaged", garbage); err != nil {
		t.Fatal(err)
	}
	f.event("evt-high", "github.issue.opened", "high")
	f.tick()
	eqList(t, "events held", f.ids(layout.QEvents, layout.Pending), "evt-high")
	eqList(t, "tasks admitted", f.ids(layout.QTasks, layout.Pending))
	if b, err := st.Get(t.Context(), ns, "damaged"); err != nil || !bytes.Equal(b, garbage) {
		t.Errorf("the damaged record was removed or rewritten: %v", err)
	}
	d, err := spend.StoreDays(st).Load(t.Context(), today)
	if !errors.Is(err, spend.ErrDamaged) {
		t.Errorf("load: %v, want ErrDamaged", err)
	}
	eq(t, "cost read past the damage", d.Summary().Totals.CostUSD, 0.5)
}
