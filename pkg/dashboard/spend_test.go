package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// storeOf is a files store of l (the server opens its own beside it).
func storeOf(t *testing.T, l layout.Layout) store.Store {
	t.Helper()
	return withStore(t, Options{Layout: l}).Store
}

// ledger records today's spend (one attempt of $0.5) in the store and
// leaves exactly `damaged` records there that do not decode.
func ledger(t *testing.T, l layout.Layout, now time.Time, damaged int) {
	t.Helper()
	st := storeOf(t, l)
	date := spend.Date(now)
	if _, err := spend.StoreDays(kv.OnStore(st)).Open(t.Context(), date).Record([]string{"task-20261124-001#0#a"},
		[]spend.Entry{{Task: "task-20261124-001", General: "gen-pr", Engine: "claude", CostUSD: ptr(0.5), At: doc.FormatTime(now)}}); err != nil {
		t.Fatal(err)
	}
	ns, _ := spend.Namespace(date)
	err := st.Update(t.Context(), func(tx store.Tx) error {
		for i := range 8 {
			key := fmt.Sprintf("torn-%d", i)
			if i >= damaged {
				if err := tx.Delete(ns, key); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				continue
			}
			if err := tx.Set(ns, key, []byte("{\"key\": \"torn\n")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMetrics_SpendLedgerDamagedLines(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.Local)
	l := newBase(t)
	ledger(t, l, now, 0)
	_, url := startServer(t, Options{Layout: l, Clock: clock.NewFake(now), Budget: config.KingBudget{DailyUSD: ptr(10.0)}})
	if v := metricValue(t, scrape(t, url), "kingdom_spend_ledger_damaged_lines"); v != 0 {
		t.Errorf("damaged lines of a whole ledger = %v, want 0", v)
	}

	ledger(t, l, now, 2)
	fams := scrape(t, url)
	if v := metricValue(t, fams, "kingdom_spend_ledger_damaged_lines"); v != 2 {
		t.Errorf("damaged lines = %v, want 2", v)
	}
	// What parses still counts, a lower bound the gauge above qualifies.
	if v := metricValue(t, fams, "kingdom_spend_today_usd"); v != 0.5 {
		t.Errorf("spend today with damaged lines = %v, want 0.5", v)
	}
	if v := metricValue(t, fams, "kingdom_budget_used_ratio"); v != 0.05 {
		t.Errorf("budget ratio with damaged lines = %v, want 0.05", v)
	}
}

func TestState_CarriesLedgerDamageAndWhyWorkWaits(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.Local)
	l := newBase(t)
	ledger(t, l, now, 3)
	until := now.Add(time.Hour)
	rec := waits.Record{UpdatedAt: now, Waits: []waits.Wait{
		{EventID: "evt-inbox-1", Reason: waits.EnginePause, Detail: "engine claude paused by a usage limit", Since: now.Add(-time.Minute), Until: &until},
		{TaskID: "task-20261124-002", Reason: waits.MaxSoldiers, Detail: "3 of 3 soldiers run", Since: now},
		{EventID: "../../etc/passwd", Reason: waits.Budget, Detail: "token sk-ant-api03-" + strings.Repeat("x", 40), Since: now},
	}}
	if err := waits.Write(t.Context(), kv.OnStore(storeOf(t, l)), rec); err != nil {
		t.Fatal(err)
	}
	_, url := startServer(t, Options{Layout: l, Clock: clock.NewFake(now)})

	st := state(t, url)
	if st.Spend != (SpendInfo{Date: spend.Date(now), Damaged: 3}) {
		t.Errorf("spend = %+v, want 3 damaged lines on %s", st.Spend, spend.Date(now))
	}
	if len(st.Waits) != 3 || st.WaitsOmitted != 0 {
		t.Fatalf("waits = %+v (omitted %d), want 3", st.Waits, st.WaitsOmitted)
	}
	want := WaitInfo{EventID: "evt-inbox-1", Reason: "engine_pause", Detail: "engine claude paused by a usage limit",
		Since: doc.FormatTime(now.Add(-time.Minute)), Until: doc.FormatTime(until)}
	if st.Waits[0] != want {
		t.Errorf("waits[0] = %+v, want %+v", st.Waits[0], want)
	}
	if w := st.Waits[1]; w.TaskID != "task-20261124-002" || w.Reason != "max_soldiers" || w.Until != "" {
		t.Errorf("waits[1] = %+v", w)
	}
	if w := st.Waits[2]; w.EventID != "" || strings.Contains(w.Detail, "sk-ant-api03-xxxx") {
		t.Errorf("waits[2] = %+v, want its invalid id dropped and its secret redacted", w)
	}

	// The operator removes the damaged records; a backlog waits on health.
	ledger(t, l, now, 0)
	many := waits.Record{UpdatedAt: now}
	for i := range maxWaits + 7 {
		many.Waits = append(many.Waits, waits.Wait{EventID: fmt.Sprintf("evt-inbox-%d", i), Reason: waits.Health, Detail: "health orange", Since: now})
	}
	if err := waits.Write(t.Context(), kv.OnStore(storeOf(t, l)), many); err != nil {
		t.Fatal(err)
	}
	st = state(t, url)
	if st.Spend.Damaged != 0 {
		t.Errorf("damaged after the repair = %d", st.Spend.Damaged)
	}
	if len(st.Waits) != maxWaits || st.WaitsOmitted != 7 {
		t.Errorf("waits = %d (omitted %d), want %d and 7", len(st.Waits), st.WaitsOmitted, maxWaits)
	}
}

// state fetches /api/v1/state and checks it against schemas/state.json.
func state(t *testing.T, url string) State {
	t.Helper()
	code, body := get(t, url+"/api/v1/state")
	if code != 200 {
		t.Fatalf("state: %d %s", code, body)
	}
	if err := schema.Validate(doc.KindState, []byte(body)); err != nil {
		t.Fatalf("state does not match schemas/state.json: %v\n%s", err, body)
	}
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}
