package king

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

func fptr(f float64) *float64 { return &f }

func usage(in, out int) map[string]any {
	return map[string]any{"input_tokens": in, "output_tokens": out, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
}

// spent records an attempt's cost in the day's ledger, as the king would.
func (f *fixture) spent(date, key string, e spend.Entry) {
	f.t.Helper()
	if _, err := spend.StoreDays(kv.OnStore(f.st)).Open(f.t.Context(), date).Record([]string{key}, []spend.Entry{e}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) ledger(date string) *spend.Day {
	f.t.Helper()
	d, err := spend.StoreDays(kv.OnStore(f.st)).Load(f.t.Context(), date)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func TestKing_EveryAttemptCostedAndTaskTotalsSummed(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error": "engine crashed", "error_reason": "EngineError",
		"cost_usd": 0.25, "usage": usage(1000, 200), "soldier_id": "soldier-1-a"})
	f.tick()
	eq(t, "retry_count after the first attempt", f.task(layout.Pending, task1).RetryCount, 1)

	f.clk.Advance(2 * time.Minute)
	f.claim(task1)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "fixed", "retry_count": 1,
		"cost_usd": 0.5, "usage": usage(3000, 400), "soldier_id": "soldier-2-b", "duration_seconds": 125})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)

	done := f.internal("task.completed")
	if len(done) != 1 {
		t.Fatalf("task.completed = %d, want 1", len(done))
	}
	d := data(done[0])
	eq(t, "task cost_usd", d["cost_usd"], any(0.75))
	eq(t, "attempts costed", d["attempts_costed"], any(2.0))
	u, _ := d["usage"].(map[string]any)
	eq(t, "task input tokens", u["input_tokens"], any(4000.0))
	eq(t, "task output tokens", u["output_tokens"], any(600.0))

	m := f.message("msg-" + task1 + "-done")
	if !strings.Contains(m.Content, "$0.75") || !strings.Contains(m.Content, "2m5s") {
		t.Errorf("completion message %q lacks the cost and duration", m.Content)
	}

	s := f.ledger(spend.Date(f.clk.Now())).Summary()
	eq(t, "day total", s.Totals.CostUSD, 0.75)
	eq(t, "day attempts", s.Totals.Attempts, 2)
	eq(t, "gen-pr total", s.Generals["gen-pr"].CostUSD, 0.75)
	eq(t, "claude total", s.Engines["claude"].CostUSD, 0.75)
	eq(t, "claude tokens", s.Engines["claude"].Tokens, int64(4600))
}

// An attempt without a dollar figure (codex without pricing) makes the
// task's cost null on its task.* event, not a 0 that reads as free (§10.6);
// the message shows its tokens instead.
func TestKing_UnpricedTaskCostIsNullNotZero(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "done", "usage": usage(1000, 200), "soldier_id": "soldier-1-a"})
	f.tick()
	done := f.internal("task.completed")
	if len(done) != 1 {
		t.Fatalf("task.completed = %d, want 1", len(done))
	}
	d := data(done[0])
	if v, ok := d["cost_usd"]; !ok || v != nil {
		t.Errorf("cost_usd = %v (present %v), want null", v, ok)
	}
	eq(t, "attempts costed", d["attempts_costed"], any(1.0))
	if m := f.message("msg-" + task1 + "-done"); !strings.Contains(m.Content, "1200 tokens") {
		t.Errorf("completion message %q lacks the tokens", m.Content)
	}
}

func TestKing_AttemptRecordedOnceAcrossRepeats(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "cost_usd": 0.4, "usage": usage(10, 10), "soldier_id": "soldier-1-a"})
	var tk doc.Task
	if err := f.k.tasks.ReadJSON(layout.InProgress, task1, &tk); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.l.ResultFinal(task1))
	if err != nil {
		t.Fatal(err)
	}
	res, err := schema.DecodeResult(b)
	if err != nil {
		t.Fatal(err)
	}
	// A king killed after recording but before completing repeats the
	// record on restart: the ledger must not count the attempt twice.
	for range 3 {
		if err := f.k.recordAttempt(&tk, res, decodeMoney(b)); err != nil {
			t.Fatal(err)
		}
		f.newKing()
	}
	f.tick()
	s := f.ledger(spend.Date(f.clk.Now())).Summary()
	eq(t, "attempts", s.Totals.Attempts, 1)
	eq(t, "cost", s.Totals.CostUSD, 0.4)
}

func TestKing_BudgetAdmissionWarningsAndNewDay(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Budget = spend.Budget{DailyUSD: fptr(1.00), TaskUSD: fptr(0.10)}
	f.newKing()
	today := spend.Date(f.clk.Now())
	f.spent(today, "task-20261121-900#0#s", spend.Entry{Task: "task-20261121-900", General: "gen-pr", Engine: "claude", CostUSD: fptr(0.95)})

	f.event("evt-normal", "github.pr.review_requested", "normal")
	f.event("evt-high", "github.issue.opened", "high")
	f.tick()
	eqList(t, "events still pending", f.ids(layout.QEvents, layout.Pending), "evt-normal")
	eqList(t, "tasks admitted", f.ids(layout.QTasks, layout.Pending), task1)
	eq(t, "admitted task", f.task(layout.Pending, task1).EventID, "evt-high")
	eq(t, "budget warnings at 95%", len(f.internal("system.budget_warning")), 1)
	eq(t, "budget exceeded at 95%", len(f.internal("system.budget_exceeded")), 0)

	// The high task spends 0.10: 1.05 of 1.00.
	f.claim(task1)
	f.finalResult(task1, map[string]any{"status": "success", "cost_usd": 0.10, "soldier_id": "soldier-1-a"})
	f.tick()
	f.event("evt-high-2", "github.issue.opened", "high")
	for range 3 {
		f.clk.Advance(time.Minute)
		f.tick()
	}
	eqList(t, "events pending past 100%", f.ids(layout.QEvents, layout.Pending), "evt-high-2", "evt-normal")
	eq(t, "budget warnings", len(f.internal("system.budget_warning")), 1)
	ex := f.internal("system.budget_exceeded")
	eq(t, "budget exceeded", len(ex), 1)
	eq(t, "exceeded cost", data(ex[0])["cost_usd"], any(1.05))

	// Host local midnight: a new day, a new budget.
	f.clk.Advance(24 * time.Hour)
	f.tick()
	eqList(t, "events pending on the next day", f.ids(layout.QEvents, layout.Pending))
	eq(t, "budget warnings after the new day", len(f.internal("system.budget_warning")), 1)
}

func TestKing_ManifestBudgetOverridesTaskBudget(t *testing.T) {
	f := newFixture(t, genPR+"budget_usd: 0.01\n")
	f.cfg.Budget = spend.Budget{DailyUSD: fptr(1.00), TaskUSD: fptr(0.50)}
	f.newKing()
	today := spend.Date(f.clk.Now())
	f.spent(today, "x#0#s", spend.Entry{Task: "task-20261121-900", General: "gen-pr", Engine: "claude", CostUSD: fptr(0.7)})
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	eqList(t, "admitted with the manifest's 0.01", f.ids(layout.QTasks, layout.Pending), task1)
}

func TestKing_DailyTokensBudget(t *testing.T) {
	f := newFixture(t, genPR)
	n := int64(1000)
	f.cfg.Budget = spend.Budget{DailyTokens: &n}
	f.newKing()
	today := spend.Date(f.clk.Now())
	f.spent(today, "x#0#s", spend.Entry{Task: "task-20261121-900", General: "gen-pr", Engine: "claude", Usage: spend.Usage{InputTokens: 900, OutputTokens: 150}})
	f.event("evt-1", "github.issue.opened", "high")
	f.tick()
	eqList(t, "nothing admitted past the token budget", f.ids(layout.QTasks, layout.Pending))
	eq(t, "exceeded", len(f.internal("system.budget_exceeded")), 1)
}

const genCodex = `name: gen-codex
description: Answers issues with codex.
engine: codex
subscribes: [github.issue.*]
`

const genPRIssues = `name: gen-pr
description: Reviews pull requests.
default_repo: acme/web
subscribes: [github.pr.review_requested]
`

func TestKing_UsageLimitPausesTheEngineNotTheTask(t *testing.T) {
	f := newFixture(t, genPRIssues, genCodex)
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)
	reset := t0.Add(30 * time.Minute)
	for attempt := range 3 { // more limits than max_attempts: never a failure
		f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited",
			"error": "You've hit your limit · resets 10:30am (UTC)", "resets_at": doc.FormatTime(reset),
			"cost_usd": 0, "soldier_id": "soldier-" + string(rune('a'+attempt)) + "-x"})
		f.tick()
		tk := f.task(layout.Pending, task1)
		eq(t, "retry_count kept", tk.RetryCount, 0)
		eq(t, "not_before at the reset", tk.NotBefore, doc.FormatTime(reset))
		f.claim(task1)
	}
	pf, err := enginepause.Load(t.Context(), kv.OnStore(f.st))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "claude paused until", pf["claude"].Until, doc.FormatTime(reset))
	rl := f.internal("system.rate_limited")
	eq(t, "system.rate_limited events", len(rl), 1)
	eq(t, "rate_limited engine", data(rl[0])["engine"], any("claude"))
	eq(t, "rate_limited until", data(rl[0])["until"], any(doc.FormatTime(reset)))
	eq(t, "task.failed", len(f.internal("task.failed")), 0)
	if _, err := os.Stat(filepath.Join(f.l.QueueState(layout.QMessages, layout.Pending), "msg-"+task1+"-failed.json")); err == nil {
		t.Error("a ❌ message was queued for a usage limit")
	}

	// While paused: claude's general gets nothing new, codex's does.
	f.event("evt-claude", "github.pr.review_requested", "high")
	f.event("evt-codex", "github.issue.opened", "normal")
	f.clk.Advance(10 * time.Minute)
	f.tick()
	eqList(t, "held for the paused engine", f.ids(layout.QEvents, layout.Pending), "evt-claude")

	f.clk.Set(reset.Add(time.Second))
	f.tick()
	eqList(t, "admitted after the reset", f.ids(layout.QEvents, layout.Pending))
	eq(t, "still one system.rate_limited", len(f.internal("system.rate_limited")), 1)
}

func TestKing_UsageLimitWithoutResetUsesTheFallback(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited", "error": "Quota exceeded."})
	f.tick()
	eq(t, "not_before", f.task(layout.Pending, task1).NotBefore, doc.FormatTime(t0.Add(60*time.Minute)))
}

func TestKing_UsageLimitRepeatAfterCrashEmitsOnce(t *testing.T) {
	f := started(t)
	reset := t0.Add(time.Hour)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited", "error": "limit",
		"resets_at": doc.FormatTime(reset), "soldier_id": "soldier-1-a"})
	// A king killed after pausing the engine and rewriting the task, before
	// the re-queue: the task sits in in_progress/ as retrying with its result.
	tk := f.task(layout.InProgress, task1)
	if err := f.k.pauseEngine("claude", reset, "limit", task1); err != nil {
		t.Fatal(err)
	}
	tk.Status = doc.TaskRetrying
	tk.NotBefore = doc.FormatTime(reset)
	writeJSON(t, filepath.Join(f.l.QueueState(layout.QTasks, layout.InProgress), task1+".json"), tk)
	f.newKing()
	f.tick()
	eq(t, "re-queued with the same retry_count", f.task(layout.Pending, task1).RetryCount, 0)
	eq(t, "system.rate_limited", len(f.internal("system.rate_limited")), 1)
	eq(t, "ledger attempts", f.ledger(spend.Date(f.clk.Now())).Summary().Totals.Attempts, 1)
}

// A cost that would overflow the sums (1e300 dollars: garbage from an
// engine or a hand-written result) saturates: the task completes with
// task.completed emitted, its figure finite in the event, the ✅ and
// today's spend.
func TestKing_AbsurdCostSaturatesAndTheTaskStillCompletes(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "done", "cost_usd": 1e300, "soldier_id": "soldier-1-a"})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	done := f.internal("task.completed")
	if len(done) != 1 {
		t.Fatalf("task.completed = %d, want 1", len(done))
	}
	c, ok := data(done[0])["cost_usd"].(float64)
	if !ok || math.IsInf(c, 0) || math.IsNaN(c) || c <= 0 {
		t.Errorf("task.completed cost_usd = %v, want a finite positive figure", data(done[0])["cost_usd"])
	}
	m := f.message("msg-" + task1 + "-done")
	if strings.Contains(m.Content, "Inf") || strings.Contains(m.Content, "NaN") || !strings.Contains(m.Content, "$") {
		t.Errorf("✅ text %q", m.Content)
	}
	if st := f.k.budgetStatus(); math.IsInf(st.CostUSD, 0) || math.IsNaN(st.CostUSD) || st.Damaged != 0 {
		t.Errorf("today's spend = %v (damaged %d)", st.CostUSD, st.Damaged)
	}
	// A second absurd attempt on the same day keeps every sum finite.
	f.event("evt-2", "github.pr.review_requested", "normal")
	f.tick()
	f.claim("task-20261121-002")
	f.finalResult("task-20261121-002", map[string]any{"status": "success", "summary": "done", "cost_usd": 1.7e308, "soldier_id": "soldier-2-a"})
	f.tick()
	eq(t, "task.completed for both", len(f.internal("task.completed")), 2)
	if st := f.k.budgetStatus(); math.IsInf(st.CostUSD, 0) || math.IsInf(st.Ratio, 0) {
		t.Errorf("today's spend after two = %+v", st)
	}
}

// recordAttempt records one attempt's cost (recordAttempts).
func (k *King) recordAttempt(t *doc.Task, res *doc.Result, m attemptMoney) error {
	_, err := k.recordAttempts([]attempt{{t: t, res: res, m: m}})
	return err
}
