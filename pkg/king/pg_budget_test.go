package king

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Spend is shared state (SPEC §11.7): a king on host A records the cost of
// two attempts in the shared store; after A's leadership ends, the king on
// host B counts on from the day's spend and holds admission at the daily
// budget instead of re-opening it at zero. A damaged entry is skipped and
// reported, and holds admission while a daily budget is set.
func TestPG_DaySpendSurvivesAFailover(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	a.cfg.Budget = spend.Budget{DailyUSD: fptr(1.00)}
	leaseA := a.lead()
	for i := range 2 {
		a.admit(fmt.Sprintf("evt-%d", i), "github.pr.review_requested", "normal", t0.Add(time.Duration(i)*time.Second), nil)
	}
	a.tick()
	pend := a.docs(layout.QTasks, layout.Pending)
	if len(pend) != 2 {
		t.Fatalf("%d tasks, want 2", len(pend))
	}
	tq := queue.OnStore(a.st, a.l, layout.QTasks, nil, "host-a")
	for i, d := range pend {
		if err := tq.ClaimAs(layout.Pending, layout.InProgress, d.ID, store.Claim{Holder: "host-a"}); err != nil {
			t.Fatal(err)
		}
		if err := kv.PutJSON(t.Context(), kv.OnStore(a.st), kv.NSResults, d.ID, map[string]any{"task_id": d.ID, "status": "success",
			"summary": "ok", "general": "gen-pr", "duration_seconds": 1, "completed_at": doc.FormatTime(t0), "retry_count": 0,
			"cost_usd": []float64{0.6, 0.5}[i], "usage": usage(100, 10), "soldier_id": fmt.Sprintf("soldier-1-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	a.tick()
	if c := a.docs(layout.QTasks, layout.Completed); len(c) != 2 {
		t.Fatalf("%d tasks completed, want 2", len(c))
	}
	today := spend.Date(clk.Now())
	if st := a.k.budgetStatus(); st.CostUSD != 1.1 || !st.Exceeded {
		t.Fatalf("host a's status %+v, want $1.10 exceeded", st)
	}

	// Failover: host b's king has no ledger file, yet sees the day.
	if err := leaseA.Release(); err != nil {
		t.Fatal(err)
	}
	b := newPGHost(t, dsn, "host-b", clk, genPR)
	b.cfg.Budget = spend.Budget{DailyUSD: fptr(1.00)}
	b.lead()
	b.admit("evt-high", "github.issue.opened", "high", t0.Add(time.Minute), nil)
	clk.Advance(time.Minute)
	b.tick()
	if p := b.docs(layout.QEvents, layout.Pending); len(p) != 1 {
		t.Fatalf("%d events pending on host b, want the high one held at the used-up budget", len(p))
	}
	st := b.k.budgetStatus()
	if st.CostUSD != 1.1 || !st.Exceeded || st.Damaged != 0 {
		t.Fatalf("host b's status %+v, want $1.10 exceeded", st)
	}
	// A repeat of an attempt already recorded (a result processed again
	// after a crash) counts nothing.
	var tk doc.Task
	d := a.docs(layout.QTasks, layout.Completed)[0]
	tk.ID, tk.TargetGeneral = d.ID, "gen-pr"
	res := &doc.Result{CompletedAt: doc.FormatTime(t0), SoldierID: "soldier-1-0"}
	if err := b.k.recordAttempt(&tk, res, attemptMoney{CostUSD: fptr(0.6)}); err != nil {
		t.Fatal(err)
	}
	if st := b.k.budgetStatus(); st.CostUSD != 1.1 {
		t.Fatalf("after a repeat: %+v", st)
	}

	// A damaged entry: skipped, reported, and the day's figure is unknown,
	// so even a larger budget admits nothing.
	if err := kv.OnStore(b.st).Put(t.Context(), "spend-"+today, "damaged", []byte(`{"key":"task-x#0#s","cost_u`)); err != nil {
		t.Fatal(err)
	}
	b.cfg.Budget = spend.Budget{DailyUSD: fptr(100)}
	clk.Advance(time.Minute)
	b.tick()
	if p := b.docs(layout.QEvents, layout.Pending); len(p) != 1 {
		t.Fatalf("%d events pending, want the event held while the ledger is damaged", len(p))
	}
	if st := b.k.budgetStatus(); st.CostUSD != 1.1 || st.Damaged != 1 {
		t.Errorf("status with a damaged entry %+v, want $1.10 and 1 damaged", st)
	}
	day, err := spend.StoreDays(kv.OnStore(a.st)).Load(t.Context(), today)
	if !errors.Is(err, spend.ErrDamaged) || day.Summary().Totals.Attempts != 2 {
		t.Errorf("load: %v, %d attempts; want damage reported and 2 attempts", err, day.Summary().Totals.Attempts)
	}
}
