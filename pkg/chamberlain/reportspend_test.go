package chamberlain

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"

	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// The daily report's spend covers the same window as its counts (since the
// previous report), across the local midnight inside it: an attempt after
// yesterday's report hour is in today's report, one before it is not.
func TestDailyReport_SpendCoversTheReportWindow(t *testing.T) {
	day1 := time.Date(2026, 11, 21, 18, 0, 0, 0, time.Local)
	e := newEnv(t, day1.Add(-8*time.Hour))
	r := e.role(ModeDaemon)
	e.tick(r) // 10:00: the first report waits for 18:00
	e.clk.Set(day1)
	e.tick(r) // day 1's report; the next window starts here
	put := func(at time.Time, key string, v float64) {
		t.Helper()
		e.spendAt(at, map[string]spend.Entry{key: {Task: key, General: "gen-pr", Engine: "claude", CostUSD: usd(v),
			Usage: spend.Usage{InputTokens: 10, OutputTokens: 5}, Status: doc.ResultSuccess, At: doc.FormatTime(at)}})
	}
	put(day1.Add(-6*time.Hour), "task-20261121-001#0#a", 4) // before day 1's report
	put(day1.Add(2*time.Hour), "task-20261121-002#0#b", 1)  // 20:00 day 1
	put(day1.Add(15*time.Hour), "task-20261122-001#0#c", 2) // 09:00 day 2
	e.clk.Set(day1.Add(24 * time.Hour))
	e.tick(r)
	b, err := os.ReadFile(e.l.DailyReport("20261122"))
	if err != nil {
		t.Fatal(err)
	}
	var doc report.DailyReport
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Spend == nil || doc.Spend.Totals.CostUSD != 3 || doc.Spend.Totals.Attempts != 2 || doc.Spend.Generals["gen-pr"].CostUSD != 3 {
		t.Fatalf("report spend = %+v, want $3 over 2 attempts (20:00 day 1 and 09:00 day 2)", doc.Spend)
	}
}
