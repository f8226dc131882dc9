package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Money and limits (SPEC §10.6–§10.8), the king's side:
//
//   - every attempt's cost goes into the day's ledger (pkg/spend) when its
//     final result is processed, before the rename that marks the result
//     done; the entry's key makes a repeat after a crash count nothing;
//   - admission holds back work the budget or an engine pause forbids;
//   - crossing 80 % and 100 % of the daily budget is announced once a day.

// attemptMoney is what a final result says about its attempt's cost and
// limit, read from the file's own bytes (fields of §10.6 and §10.8).
type attemptMoney struct {
	Usage    *spend.Usage `json:"usage"`
	CostUSD  *float64     `json:"cost_usd"`
	ResetsAt string       `json:"resets_at"`
}

func decodeMoney(b []byte) attemptMoney {
	var m attemptMoney
	if json.Unmarshal(b, &m) != nil {
		return attemptMoney{}
	}
	if m.CostUSD != nil && (math.IsNaN(*m.CostUSD) || *m.CostUSD < 0) {
		m.CostUSD = nil
	}
	if m.CostUSD != nil && *m.CostUSD > maxAttemptUSD {
		c := float64(maxAttemptUSD)
		m.CostUSD = &c
	}
	if m.Usage != nil {
		u := *m.Usage
		for _, n := range []*int64{&u.InputTokens, &u.OutputTokens, &u.CacheReadInputTokens, &u.CacheCreationInputTokens} {
			*n = min(max(*n, 0), maxAttemptTokens)
		}
		m.Usage = &u
	}
	return m
}

// Bounds on what reaches the king's sums. No agent run costs a million
// dollars or processes a trillion tokens; a larger figure (garbage from an
// engine or a hand-written result) saturates here, so the day's and the
// task's sums stay finite: a sum overflowed to +Inf cannot be carried in
// JSON, and the task.* event that should carry it would be lost.
const (
	maxAttemptUSD    = 1e6
	maxAttemptTokens = 1e12
	maxSumUSD        = 1e12
	maxSumTokens     = 1 << 60
)

// finiteUSD bounds a dollar sum for display and events: NaN and negatives
// are 0, anything above maxSumUSD (+Inf included) is maxSumUSD.
func finiteUSD(f float64) float64 {
	switch {
	case math.IsNaN(f) || f < 0:
		return 0
	case f > maxSumUSD:
		return maxSumUSD
	}
	return f
}

// boundTotals applies finiteUSD to a sum read from the ledger, and keeps its
// token counts from wrapping negative.
func boundTotals(t spend.Totals) spend.Totals {
	t.CostUSD = finiteUSD(t.CostUSD)
	if t.Tokens < 0 || t.Tokens > maxSumTokens {
		t.Tokens = maxSumTokens
	}
	for _, n := range []*int64{&t.Usage.InputTokens, &t.Usage.OutputTokens, &t.Usage.CacheReadInputTokens, &t.Usage.CacheCreationInputTokens} {
		if *n < 0 || *n > maxSumTokens {
			*n = maxSumTokens
		}
	}
	return t
}

// budgetMarks is state/king/budget.json: the thresholds today's spend has
// already crossed, so each is announced once a day.
type budgetMarks struct {
	Date     string `json:"date"`
	Warned   bool   `json:"warned"`
	Exceeded bool   `json:"exceeded"`
}

// system is system.yaml (engines, usage-limit fallback), loaded once.
func (k *King) system() *config.System {
	if k.sys == nil {
		sys, err := config.LoadSystem(k.l.ConfigFile(config.SystemFile))
		if err != nil {
			k.log.Warn("system.yaml unusable; engine defaults assumed", "err", err)
			sys = config.DefaultSystem()
		}
		k.sys = sys
	}
	return k.sys
}

// engineOf is the engine general's soldiers run (manifest, else system).
func (k *King) engineOf(general string) string {
	return k.system().EngineFor(k.routes.Manifest(general))
}

// ledger returns a day's ledger open for recording, in the store (SPEC
// §11.7: a king taking over on another host counts on from the day's
// spend rather than from zero). A damaged ledger is never moved aside:
// what parses counts, and the damage holds admission (spend.Admit).
func (k *King) ledger(date string) spend.Ledger {
	return spend.StoreDays(k.kv).Open(k.ctx(), date)
}

// attempt is one final result to act on, with what it says about money.
type attempt struct {
	t   *doc.Task
	res *doc.Result
	m   attemptMoney
}

// recordAttempts puts the attempts' costs into the ledgers of the days
// they completed, once each: one transaction per day for the whole tick, before any of their results is marked processed. It
// returns the attempts whose cost is recorded (the others wait for the
// next tick) and the errors.
func (k *King) recordAttempts(as []attempt) ([]attempt, error) {
	type group struct {
		keys    []string
		entries []spend.Entry
		idx     []int
	}
	byDate := map[string]*group{}
	var dates []string
	for i, a := range as {
		t, res, m := a.t, a.res, a.m
		at := k.now()
		if ct, err := doc.ParseTime(res.CompletedAt); err == nil {
			at = ct
		}
		date := spend.Date(at)
		e := spend.Entry{
			Task: t.ID, Attempt: res.RetryCount, General: t.TargetGeneral, Engine: k.engineOf(t.TargetGeneral),
			CostUSD: m.CostUSD, Status: res.Status, ErrorReason: res.ErrorReason, At: doc.FormatTime(at),
		}
		if m.Usage != nil {
			e.Usage = *m.Usage
		}
		g := byDate[date]
		if g == nil {
			g = &group{}
			byDate[date] = g
			dates = append(dates, date)
		}
		g.keys = append(g.keys, spend.Key(t.ID, res.RetryCount, firstNonEmpty(res.SoldierID, res.CompletedAt)))
		g.entries = append(g.entries, e)
		g.idx = append(g.idx, i)
	}
	ok := make([]bool, len(as))
	var errs []error
	for _, date := range dates {
		g := byDate[date]
		if _, err := k.ledger(date).Record(g.keys, g.entries); err != nil {
			errs = append(errs, fmt.Errorf("record the cost of %d attempts: %w", len(g.keys), err))
			continue
		}
		for _, i := range g.idx {
			ok[i] = true
		}
	}
	out := as[:0:0]
	for i, a := range as {
		if ok[i] {
			out = append(out, a)
		}
	}
	return out, errors.Join(errs...)
}

// taskTotals sums a task's attempts over the days it lived (at most a
// month of ledgers).
func (k *King) taskTotals(t *doc.Task) spend.Totals {
	created, _ := doc.ParseTime(t.CreatedAt)
	return boundTotals(spend.TaskTotals(created, k.now(), 31, func(date string) spend.Totals {
		return boundTotals(k.ledger(date).TaskTotals(t.ID))
	}))
}

// withTotals adds the task's totals over its attempts to a task.* event.
// Its cost is null when no attempt was priced (§10.6: codex without
// pricing), not a zero that reads as free.
func withTotals(tot spend.Totals, data map[string]any) map[string]any {
	tot = boundTotals(tot)
	data["cost_usd"] = tot.Priced()
	data["usage"] = tot.Usage
	data["attempts_costed"] = tot.Attempts
	return data
}

// costNote is the cost and duration line of a completion message.
func costNote(tot spend.Totals, res *doc.Result) string {
	secs := res.DurationSeconds
	if math.IsNaN(secs) || secs < 0 {
		secs = 0
	}
	// A duration past what time.Duration holds saturates at its maximum.
	d := time.Duration(math.MaxInt64)
	if secs < float64(math.MaxInt64/int64(time.Second)) {
		d = time.Duration(secs * float64(time.Second)).Round(time.Second)
	}
	cost := fmt.Sprintf("$%.2f", finiteUSD(tot.CostUSD))
	if tot.Attempts > 0 && tot.Unpriced == tot.Attempts {
		cost = fmt.Sprintf("%d tokens", tot.Tokens)
	}
	return fmt.Sprintf(" (%s, %s)", d, cost)
}

// budgetStatus is today's spend against the daily budget. A ledger that
// cannot be read, wholly or in part, shows as Status.Damaged, which holds
// admission while a daily budget is set (spend.Admit).
func (k *King) budgetStatus() spend.Status {
	date := spend.Date(k.now())
	st := spend.Evaluate(date, boundTotals(k.ledger(date).Summary().Totals), k.cfg.Budget)
	if math.IsNaN(st.Ratio) || st.Ratio > maxSumUSD {
		st.Ratio = maxSumUSD
	}
	return st
}

// budgetCrossings emits system.budget_warning and system.budget_exceeded
// the first time today's spend reaches 80 % and 100 % of the daily budget.
// The mark is saved before the event: a crash in between loses one event
// rather than announcing it twice (the chamberlain's alert keys on the day).
func (k *King) budgetCrossings(s spend.Status) error {
	if !s.Warning {
		return nil
	}
	var marks budgetMarks
	if b, err := os.ReadFile(k.l.BudgetState()); err == nil {
		_ = json.Unmarshal(b, &marks) // a broken file: announce again
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read budget marks: %w", err)
	}
	if marks.Date != s.Date {
		marks = budgetMarks{Date: s.Date}
	}
	warn := s.Warning && !marks.Warned
	exceed := s.Exceeded && !marks.Exceeded
	if !warn && !exceed {
		return nil
	}
	marks.Warned = marks.Warned || s.Warning
	marks.Exceeded = marks.Exceeded || s.Exceeded
	if err := atomicfile.WriteJSON(k.l.BudgetState(), marks); err != nil {
		return fmt.Errorf("write budget marks: %w", err)
	}
	data := map[string]any{"date": s.Date, "cost_usd": s.CostUSD, "tokens": s.Tokens,
		"daily_usd": s.DailyUSD, "daily_tokens": s.DailyTokens, "ratio": math.Round(s.Ratio*1000) / 1000}
	if warn {
		k.em.Emit("system.budget_warning", data)
		k.log.Warn("daily budget 80% reached: " + s.Describe())
	}
	if exceed {
		k.em.Emit("system.budget_exceeded", data)
		k.log.Warn("daily budget used up: " + s.Describe())
	}
	return nil
}

// moneyGate is one tick's view of the budget and the engine pauses.
type moneyGate struct {
	k      *King
	status spend.Status
	pauses enginepause.File
	now    time.Time
}

// moneyGate reads today's budget status and the engine pauses, and
// announces budget thresholds newly crossed.
func (k *King) moneyGate() *moneyGate {
	g := &moneyGate{k: k, now: k.now(), status: k.budgetStatus()}
	if spend.Limited(k.cfg.Budget) {
		if err := k.budgetCrossings(g.status); err != nil {
			k.log.Warn("budget thresholds", "err", err)
		}
	}
	p, err := enginepause.Load(k.ctx(), k.kv)
	if err != nil {
		k.log.Warn("engine pauses unreadable", "err", err)
	}
	g.pauses = p
	return g
}

// hold says why a task of priority for general (""= not yet known) may not
// start now, or nil: its engine's usage-limit pause, the daily budget used
// up, or today's spend plus its task budget passing the day's (§10.7).
func (g *moneyGate) hold(priority, general string) *hold {
	if general != "" {
		eng := g.k.engineOf(general)
		if until, ok := g.pauses.Active(eng, g.now); ok {
			return &hold{reason: waits.EnginePause, level: eng, until: until,
				detail: fmt.Sprintf("engine %s paused by a usage limit until %s (`start resume --engine %s` lifts it)", eng, g.k.clockTime(until), eng)}
		}
	}
	taskUSD := spend.TaskBudget(g.k.cfg.Budget, g.k.routes.Manifest(general))
	if ok, _ := spend.Admit(g.status, taskUSD, priority); ok {
		return nil
	}
	s := g.status
	if s.Exceeded || taskUSD == nil || s.DailyUSD == nil {
		return &hold{reason: waits.Budget, detail: "daily budget used up: " + s.Describe() + "; only a new day or a larger budget.daily_usd admits more"}
	}
	return &hold{reason: waits.TaskBudget, detail: fmt.Sprintf("today $%.2f + this task's budget $%.2f would pass the daily $%.2f",
		finiteUSD(s.CostUSD), finiteUSD(*taskUSD), finiteUSD(*s.DailyUSD))}
}
