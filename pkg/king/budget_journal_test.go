package king

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// The ledger is appended per attempt (a journal beside the day's
// snapshot) and a past day's journal is folded into its snapshot when the
// king opens today's ledger.
func TestKing_CostJournalAppendedAndPastDaysFolded(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "cost_usd": 0.5, "soldier_id": "soldier-1-a"})
	f.tick()
	today := spend.Date(f.clk.Now())
	if _, err := os.Stat(spend.JournalPath(f.l.SpendDay(today))); err != nil {
		t.Fatalf("no journal for today: %v", err)
	}
	eq(t, "today's cost", f.ledger(today).Summary().Totals.CostUSD, 0.5)

	// The next day: yesterday's journal becomes its snapshot alone.
	f.clk.Advance(24 * time.Hour)
	f.newKing()
	f.tick()
	if _, err := os.Stat(spend.JournalPath(f.l.SpendDay(today))); !os.IsNotExist(err) {
		t.Errorf("yesterday's journal after the new day's first tick: %v", err)
	}
	eq(t, "yesterday's cost from its snapshot", f.ledger(today).Summary().Totals.CostUSD, 0.5)
}
