package chamberlain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"

	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func usd(v float64) *float64 { return &v }

// spendLedger records the given attempts in today's ledger (the store's).
func (e *env) spendLedger(entries map[string]spend.Entry) {
	e.t.Helper()
	e.spendAt(e.clk.Now(), entries)
}

// spendAt records the attempts in the ledger of at's day.
func (e *env) spendAt(at time.Time, entries map[string]spend.Entry) {
	e.t.Helper()
	var keys []string
	var es []spend.Entry
	for k, v := range entries {
		keys, es = append(keys, k), append(es, v)
	}
	if _, err := spend.StoreDays(kv.OnStore(e.st)).Open(context.Background(), spend.Date(at)).Record(keys, es); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) messagesOf(kind string) []doc.Message {
	var out []doc.Message
	for _, m := range e.messages() {
		if m.Context["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

func TestMoney_TokensAndStatsComeFromTheLedger(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	e.cfg.Budget = spend.Budget{DailyUSD: usd(10)}
	e.spendLedger(map[string]spend.Entry{
		"task-20261121-001#0#a": {Task: "task-20261121-001", General: "gen-pr", Engine: "claude", CostUSD: usd(0.25),
			Usage: spend.Usage{InputTokens: 100, OutputTokens: 50, CacheReadInputTokens: 1000}},
		"task-20261121-001#1#b": {Task: "task-20261121-001", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5),
			Usage: spend.Usage{InputTokens: 200, OutputTokens: 70}},
		"task-20261121-002#0#c": {Task: "task-20261121-002", General: "gen-ops", Engine: "codex",
			Usage: spend.Usage{InputTokens: 10, OutputTokens: 5}},
	})
	r := e.role(ModeOnce)
	e.tick(r)

	b, err := os.ReadFile(e.l.Resources())
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc.KindResources, b); err != nil {
		t.Fatalf("resources.json invalid: %v\n%s", err, b)
	}
	var res Resources
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Tokens == nil || res.Tokens.Status != health.TokenOK || res.Tokens.DailyCostUSD != 0.75 ||
		res.Tokens.DailyInputTokens != 1310 || res.Tokens.DailyOutputTokens != 125 {
		t.Errorf("tokens = %+v", res.Tokens)
	}
	if res.Budget == nil || res.Budget.CostUSD != 0.75 || res.Budget.DailyUSD == nil || *res.Budget.DailyUSD != 10 {
		t.Errorf("budget = %+v", res.Budget)
	}

	var st report.Stats
	sb, err := os.ReadFile(e.l.StatsJSON())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sb, &st); err != nil {
		t.Fatal(err)
	}
	day := st.Daily[spend.Date(e.clk.Now())]
	if day.Totals.CostUSD != 0.75 || day.Totals.Attempts != 3 {
		t.Errorf("stats daily totals = %+v", day.Totals)
	}
	if day.Generals["gen-pr"].CostUSD != 0.75 || day.Generals["gen-ops"].Tokens != 15 || day.Engines["codex"].Unpriced != 1 {
		t.Errorf("stats per general/engine = %+v / %+v", day.Generals, day.Engines)
	}

	var out strings.Builder
	if err := r.Last.Table(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "BUDGET") || !strings.Contains(out.String(), "$0.75 of $10.00") {
		t.Errorf("table lacks today's spend against the budget:\n%s", out.String())
	}
}

func TestMoney_BudgetThresholdsAlertOnceEachPerDay(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	e.cfg.Budget = spend.Budget{DailyUSD: usd(1)}
	r := e.role(ModeDaemon)
	e.spendLedger(map[string]spend.Entry{"a#0#a": {Task: "a", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5)}})
	e.tick(r)
	if n := len(e.messagesOf(KindBudget)); n != 0 {
		t.Fatalf("budget alerts at 50%% = %d", n)
	}
	e.spendLedger(map[string]spend.Entry{"b#0#b": {Task: "b", General: "gen-pr", Engine: "claude", CostUSD: usd(0.35)}})
	for range 3 {
		e.clk.Advance(time.Minute)
		e.tick(r)
	}
	if n := len(e.messagesOf(KindBudget)); n != 1 {
		t.Fatalf("budget alerts at 85%% = %d, want 1", n)
	}
	e.spendLedger(map[string]spend.Entry{"c#0#c": {Task: "c", General: "gen-pr", Engine: "claude", CostUSD: usd(0.2)}})
	for range 3 {
		e.clk.Advance(time.Minute)
		e.tick(r)
	}
	ms := e.messagesOf(KindBudget)
	if len(ms) != 2 {
		t.Fatalf("budget alerts at 105%% = %d, want 2", len(ms))
	}
	var exceeded int
	for _, m := range ms {
		if strings.Contains(m.Content, "used up") {
			exceeded++
		}
	}
	if exceeded != 1 {
		t.Errorf("exceeded alerts = %d, want 1", exceeded)
	}
	if r.Last.Resources.Tokens.Status != health.TokenCritical {
		t.Errorf("token status past the budget = %s, want critical", r.Last.Resources.Tokens.Status)
	}
	e.clk.Advance(24 * time.Hour) // a new day: nothing spent, nothing alerted
	e.tick(r)
	if n := len(e.messagesOf(KindBudget)); n != 2 {
		t.Errorf("budget alerts after the day changed = %d, want still 2", n)
	}
	if r.Last.Money.Budget.CostUSD != 0 {
		t.Errorf("spend on the new day = %v", r.Last.Money.Budget.CostUSD)
	}
}

func TestMoney_EnginePauseAlertsOnceAndRecovers(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	e := newEnv(t, now)
	r := e.role(ModeDaemon)
	until := now.Add(10 * time.Minute)
	if err := enginepause.Save(t.Context(), kv.OnStore(e.st), enginepause.File{"claude": {Until: doc.FormatTime(until), Reason: "You've hit your limit"}}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.tick(r)
		e.clk.Advance(2 * time.Minute)
	}
	if n := len(e.messagesOf(KindPause)); n != 1 {
		t.Fatalf("pause alerts = %d, want 1", n)
	}
	if p := r.Last.Resources.EnginePauses["claude"]; p.Until != doc.FormatTime(until) {
		t.Errorf("resources engine_pauses = %+v", r.Last.Resources.EnginePauses)
	}
	var out strings.Builder
	r.Last.Table(&out)
	if !strings.Contains(out.String(), "PAUSED") || !strings.Contains(out.String(), "engine claude until") {
		t.Errorf("table lacks the pause:\n%s", out.String())
	}
	e.clk.Set(until.Add(time.Second))
	for range 3 {
		e.tick(r)
		e.clk.Advance(time.Minute)
	}
	var recovered int
	for _, m := range e.messagesOf(KindRecovered) {
		if strings.Contains(m.Content, "engine claude resumed") {
			recovered++
		}
	}
	if recovered != 1 {
		t.Errorf("recovered notes = %d, want 1", recovered)
	}
	if n := len(e.messagesOf(KindPause)); n != 1 {
		t.Errorf("pause alerts after the end = %d, want 1", n)
	}
	if n := len(e.messagesOf(KindFailures)); n != 0 {
		t.Errorf("failure anomalies = %d", n)
	}
}

// Events held back by an engine pause are waiting on purpose: no stale
// anomaly while the pause lasts; one after it if they are still stuck.
func TestMoney_EventsHeldByAPauseAreNotStale(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	e := newEnv(t, now)
	eq := e.queue(layout.QEvents)
	id := "evt-inbox-held-1"
	if err := eq.Put(layout.Pending, id, doc.Event{ID: id, Type: "x", Source: "inbox", Priority: "normal",
		CreatedAt: doc.FormatTime(now), Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	e.emitAs("event.detected", "sentinel", map[string]any{"event_id": id, "source": "inbox", "event_type": "x"})
	until := now.Add(3 * time.Hour)
	if err := enginepause.Save(t.Context(), kv.OnStore(e.st), enginepause.File{"claude": {Until: doc.FormatTime(until), Reason: "limit"}}); err != nil {
		t.Fatal(err)
	}
	r := e.role(ModeDaemon)
	for e.clk.Now().Before(until) {
		e.tick(r)
		e.clk.Advance(20 * time.Minute)
	}
	if n := len(e.messagesOf(KindStale)); n != 0 {
		t.Fatalf("stale alerts during the pause = %d, want 0", n)
	}
	e.clk.Set(until.Add(time.Minute))
	e.tick(r)
	if n := len(e.messagesOf(KindStale)); n != 1 {
		t.Fatalf("stale alerts after the pause = %d, want 1", n)
	}
}

// damageLedger writes n records that do not decode into today's ledger
// and returns the name the alert gives it and a repair that removes them.
func (e *env) damageLedger(n int) (path string, repair func()) {
	e.t.Helper()
	ns, err := spend.Namespace(spend.Date(e.clk.Now()))
	if err != nil {
		e.t.Fatal(err)
	}
	set := func(fn func(tx store.Tx, key string) error) {
		e.t.Helper()
		err := e.st.Update(context.Background(), func(tx store.Tx) error {
			for i := range n {
				if err := fn(tx, fmt.Sprintf("torn-%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	set(func(tx store.Tx, key string) error {
		return tx.Set(ns, key, []byte("{\"key\": \"torn\", \"cost_usd\": 0.5\n"))
	})
	return "store namespace " + ns, func() { set(func(tx store.Tx, key string) error { return tx.Delete(ns, key) }) }
}

func TestMoney_DamagedLedgerAlertsUntilRepaired(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	e.cfg.Budget = spend.Budget{DailyUSD: usd(10)}
	e.spendLedger(map[string]spend.Entry{"a#0#a": {Task: "a", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5)}})
	r := e.role(ModeDaemon)
	e.tick(r)
	if n := len(e.messagesOf(KindLedger)); n != 0 {
		t.Fatalf("ledger alerts while whole = %d", n)
	}

	path, repair := e.damageLedger(3)
	for range 3 {
		e.clk.Advance(30 * time.Second)
		e.tick(r)
	}
	ms := e.messagesOf(KindLedger)
	if len(ms) != 1 {
		t.Fatalf("ledger alerts while damaged = %d, want 1: %+v", len(ms), ms)
	}
	want := "[urgent] the spend ledger of 2026-11-21 has 3 damaged lines: admission holds while a daily budget is set; repair or remove the damaged lines in " + path
	if ms[0].Content != want || ms[0].Urgency != doc.UrgencyHigh {
		t.Errorf("alert = %q (%s), want %q (high)", ms[0].Content, ms[0].Urgency, want)
	}

	repair() // the operator removes the damaged records
	for range 3 {
		e.clk.Advance(RecoverAfter)
		e.tick(r)
	}
	var recovered []string
	for _, m := range e.messagesOf(KindRecovered) {
		if strings.Contains(m.Content, "spend ledger of 2026-11-21") {
			recovered = append(recovered, m.Content)
		}
	}
	if len(recovered) != 1 || !strings.HasPrefix(recovered[0], "Recovered: [urgent] the spend ledger") {
		t.Errorf("recovered notes = %q, want one", recovered)
	}
	if n := len(e.messagesOf(KindLedger)); n != 1 {
		t.Errorf("ledger alerts after the repair = %d, want still 1", n)
	}
}

// Events held because the damaged ledger stops admission under a budget
// are waiting on purpose, like those held by a used-up budget.
func TestMoney_EventsHeldByADamagedLedgerAreNotStale(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	e := newEnv(t, now)
	e.cfg.Budget = spend.Budget{DailyUSD: usd(10)}
	e.spendLedger(map[string]spend.Entry{"a#0#a": {Task: "a", General: "gen-pr", Engine: "claude", CostUSD: usd(0.5)}})
	_, repair := e.damageLedger(1)
	eq := e.queue(layout.QEvents)
	id := "evt-inbox-held-1"
	if err := eq.Put(layout.Pending, id, doc.Event{ID: id, Type: "x", Source: "inbox", Priority: "normal",
		CreatedAt: doc.FormatTime(now), Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	e.emitAs("event.detected", "sentinel", map[string]any{"event_id": id, "source": "inbox", "event_type": "x"})
	r := e.role(ModeDaemon)
	for range 6 {
		e.tick(r)
		e.clk.Advance(20 * time.Minute)
	}
	if n := len(e.messagesOf(KindStale)); n != 0 {
		t.Fatalf("stale alerts while the damaged ledger holds admission = %d, want 0", n)
	}
	// Repaired, the ledger no longer holds the event: it is stale.
	repair()
	e.tick(r)
	if n := len(e.messagesOf(KindStale)); n != 1 {
		t.Fatalf("stale alerts once repaired = %d, want 1", n)
	}
}
