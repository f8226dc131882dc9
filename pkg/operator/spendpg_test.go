package operator

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// `start status` and `start tasks` on h2 show the day's spend the king on
// h1 recorded in the shared store (h2 has no ledger file), and a damaged
// entry is reported.
func TestSharedPostgres_SpendFromAnotherHost(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	h1, _ := seedCluster(t, now)
	date := spend.Date(now)
	usd := func(f float64) *float64 { return &f }
	led := spend.StoreDays(h1.KV).Open(t.Context(), date)
	if _, err := led.Record([]string{"task-20261124-002#0#soldier-1-a", "task-20261124-009#0#soldier-1-b"}, []spend.Entry{
		{Task: "task-20261124-002", General: "gen-pr", Engine: "claude", CostUSD: usd(0.4)},
		{Task: "task-20261124-009", General: "gen-pr", Engine: "claude", CostUSD: usd(0.7)},
	}); err != nil {
		t.Fatal(err)
	}
	l2 := pgHost(t, "h2")
	if err := os.WriteFile(l2.ConfigFile(config.KingFile), []byte("budget:\n  daily_usd: 1.00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h2, err := OpenShared(t.Context(), l2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	rows, err := ListTasks(t.Context(), h2, now, RecentWindow)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == "task-20261124-002" && (r.CostUSD == nil || *r.CostUSD != 0.4) {
			t.Errorf("running task's cost %v, want $0.40 from the shared ledger", r.CostUSD)
		}
	}
	tc := &tmux.Client{Socket: "kingdom-shared-test-none"}
	st, err := ReadStatus(t.Context(), l2, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	if b := st.Money.Budget; b.CostUSD != 1.1 || !b.Exceeded || len(st.Money.Errs) != 0 {
		t.Fatalf("budget on h2 %+v (errors %v), want $1.10 exceeded", b, st.Money.Errs)
	}
	var out bytes.Buffer
	st.Print(&out)
	if !strings.Contains(out.String(), "spend today: $1.10 of $1.00") {
		t.Errorf("status lacks the day's spend:\n%s", out.String())
	}

	if err := h1.KV.Put(t.Context(), "spend-"+date, "damaged", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	st, err = ReadStatus(t.Context(), l2, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	st.Print(&out)
	if st.Money.Budget.Damaged != 1 || st.Money.Budget.CostUSD != 1.1 || !strings.Contains(out.String(), "1 damaged records skipped") {
		t.Errorf("status with a damaged entry %+v:\n%s", st.Money.Budget, out.String())
	}
}
