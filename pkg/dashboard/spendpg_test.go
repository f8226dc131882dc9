package dashboard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// In PostgreSQL mode the state and /metrics show the day's spend the king
// recorded in the shared store, from a host without a ledger file, and
// count a damaged entry.
func TestState_PG_SpendFromTheSharedStore(t *testing.T) {
	st := openPG(t, "host-b")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	date := spend.Date(now)
	s := kv.OnStore(st)
	usd := func(f float64) *float64 { return &f }
	if _, err := spend.StoreDays(s).Open(context.Background(), date).Record([]string{"a#0#a", "b#0#b"}, []spend.Entry{
		{Task: "a", General: "gen-pr", Engine: "claude", CostUSD: usd(0.6)},
		{Task: "b", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5)},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "spend-"+date, "damaged", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	_, url := startServer(t, Options{Layout: newBase(t), Store: st, Clock: clock.NewFake(now), Budget: spend.Budget{DailyUSD: usd(1)}})
	code, body := get(t, url+"/api/v1/state")
	if code != 200 {
		t.Fatalf("state: %d %s", code, body)
	}
	var state State
	if err := json.Unmarshal([]byte(body), &state); err != nil {
		t.Fatal(err)
	}
	if b := state.Budget; b.SpentTodayUSD != 1.1 || b.Attempts != 2 || !b.Exceeded {
		t.Errorf("budget %+v, want $1.10 over 2 attempts, exceeded", b)
	}
	if state.Spend.Damaged != 1 || !strings.Contains(strings.Join(state.Errors, "\n"), "spend-"+date) {
		t.Errorf("spend %+v errors %q, want 1 damaged entry of spend-%s reported", state.Spend, state.Errors, date)
	}
	_, m := get(t, url+"/metrics")
	for _, want := range []string{"kingdom_spend_today_usd 1.1", "kingdom_spend_ledger_damaged_lines 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
