package chamberlain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// The chamberlain on a host without the king reads the day's spend the
// king recorded in the shared store (SPEC §11.7): it alerts on the used-up
// budget, and a damaged entry raises the ledger alert naming the store.
func TestChamberlain_PG_SpendFromTheSharedStore(t *testing.T) {
	dsn := pgtest.DB(t)
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	st, err := pg.Open(context.Background(), dsn, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	st.LeaseCheck = 50 * time.Millisecond
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, start)
	e.cfg.Budget = spend.Budget{DailyUSD: usd(1)}
	r := e.roleWith(ModeDaemon, Deps{Clock: e.clk, Metrics: e.met, Tmux: e.tm, Events: eventlog.NewStoreEmitter(st, "chamberlain"), Store: st, Host: "host-b"})

	date := spend.Date(start)
	s := kv.OnStore(st)
	if _, err := spend.StoreDays(s).Open(t.Context(), date).Record([]string{"a#0#a", "b#0#b"}, []spend.Entry{
		{Task: "a", General: "gen-pr", Engine: "claude", CostUSD: usd(0.6)},
		{Task: "b", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5)},
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.tick(r)
		e.clk.Advance(30 * time.Second)
	}
	if m := r.Last.Money; m == nil || m.Budget.CostUSD != 1.1 || !m.Budget.Exceeded || m.Err != nil {
		t.Fatalf("money %+v, want $1.10 exceeded from the store", m)
	}
	if got := alertsOf(t, st, KindBudget); len(got) != 2 {
		t.Errorf("budget alerts = %d, want 80%% and 100%%", len(got))
	}

	if err := s.Put(t.Context(), "spend-"+date, "damaged", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.tick(r)
		e.clk.Advance(30 * time.Second)
	}
	if m := r.Last.Money; m.Spend.Totals.Damaged != 1 || m.Budget.CostUSD != 1.1 {
		t.Errorf("money with a damaged entry %+v", m.Spend.Totals)
	}
	got := alertsOf(t, st, KindLedger)
	if len(got) != 1 {
		t.Fatalf("ledger alerts = %d, want 1", len(got))
	}
	if want := "spend-" + date; !strings.Contains(string(got[0].Data), want) {
		t.Errorf("ledger alert %s does not name %s", got[0].Data, want)
	}
}
