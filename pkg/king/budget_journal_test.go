package king

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// The ledger is appended per attempt (one line in the day's <date>.jsonl)
// and a past day's file stays as it was, still read for its figures.
func TestKing_CostLedgerAppendedAndPastDaysKept(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "cost_usd": 0.5, "soldier_id": "soldier-1-a"})
	f.tick()
	today := spend.Date(f.clk.Now())
	if _, err := os.Stat(spend.JournalPath(f.l.SpendDay(today))); err != nil {
		t.Fatalf("no ledger for today: %v", err)
	}
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
	path := spend.JournalPath(f.l.SpendDay(today))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ledger := `{"key":"task-20261121-900#0#s","task_id":"task-20261121-900","general":"gen-pr","engine":"claude","cost_usd":0.5,"usage":{}}` + "\n" +
		`{"key":"task-20261121-901#0#s","task_id":"task-20261121-901","cost_u` + "\x00\x00garbage\n"
	if err := os.WriteFile(path, []byte(ledger), 0o600); err != nil {
		t.Fatal(err)
	}
	f.event("evt-high", "github.issue.opened", "high")
	f.tick()
	eqList(t, "events held", f.ids(layout.QEvents, layout.Pending), "evt-high")
	eqList(t, "tasks admitted", f.ids(layout.QTasks, layout.Pending))
	if b, err := os.ReadFile(path); err != nil || string(b) != ledger {
		t.Errorf("the damaged ledger was moved or rewritten: %v", err)
	}
	d, err := spend.Load(f.l.SpendDay(today), today)
	if !errors.Is(err, spend.ErrDamaged) {
		t.Errorf("load: %v, want ErrDamaged", err)
	}
	eq(t, "cost read past the damage", d.Summary().Totals.CostUSD, 0.5)
}
