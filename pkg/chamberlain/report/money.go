package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Money is today's spend, budget and engine pauses (SPEC §10.6–§10.8).
type Money struct {
	Spend  spend.Summary                `json:"spend"`
	Budget spend.Status                 `json:"budget"`
	Pauses map[string]enginepause.Pause `json:"engine_pauses"`
	Err    error                        `json:"-"`
	// PausesErr: engine-pause.json did not load, so Pauses says nothing
	// about which pauses ended.
	PausesErr error `json:"-"`
}

// ReadMoney reads today's cost ledger and the engine pause file at now,
// and evaluates the spend against king.yaml's budget. Errors are kept in
// Err and PausesErr: what did load is still reported.
func ReadMoney(l layout.Layout, budget config.KingBudget, now time.Time) *Money {
	date := spend.Date(now)
	d, err := spend.Load(l.SpendDay(date), date)
	m := &Money{Spend: d.Summary(), Pauses: map[string]enginepause.Pause{}, Err: err}
	m.Budget = spend.Evaluate(date, m.Spend.Totals, budget)
	pf, err := enginepause.Load(context.Background(), kv.Files(l))
	m.PausesErr = err
	for _, eng := range pf.Engines() {
		if until, ok := pf.Active(eng, now); ok {
			p := pf[eng]
			p.Until = schema.FormatTime(until)
			m.Pauses[eng] = p
		}
	}
	return m
}

// Tokens is the token status from the ledger: against king.yaml's daily
// budget when one is set, else chamberlain.yaml token_limits. On a day the
// ledger has no attempt, Claude's stats-cache.json (when present) is used.
func Tokens(c *config.Chamberlain, budget config.KingBudget, now time.Time, m *Money) (health.Tokens, error) {
	if m == nil || m.Err != nil || m.Spend.Totals.Attempts == 0 {
		if tk, err := ReadTokens(c.StatsPath(), now.In(time.Local).Format("2006-01-02"), c); err == nil && tk.DailyCostUSD > 0 {
			return tk, nil
		}
	}
	if m == nil {
		return health.Tokens{Status: health.TokenUnknown}, nil
	}
	u := m.Spend.Totals.Usage
	tk := health.Tokens{
		DailyCostUSD:      round2(m.Spend.Totals.CostUSD),
		DailyInputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		DailyOutputTokens: u.OutputTokens,
	}
	switch {
	case spend.Limited(budget):
		tk.Status = health.TokenOK
		if m.Budget.Exceeded {
			tk.Status = health.TokenCritical
		} else if m.Budget.Warning {
			tk.Status = health.TokenWarning
		}
	case c.TokenLimits.Enabled:
		tk.Status = health.EvaluateTokens(m.Spend.Totals.CostUSD, c.TokenLimits.DailyBudgetUSD, c.TokenLimits.WarningPct, c.TokenLimits.CriticalPct)
	default:
		tk.Status = health.TokenUnknown
	}
	return tk, m.Err
}

// statsCache is the part of Claude Code's ~/.claude/stats-cache.json we read.
type statsCache struct {
	DailyModelTokens []struct {
		Date          string             `json:"date"`
		TokensByModel map[string]float64 `json:"tokensByModel"`
	} `json:"dailyModelTokens"`
}

// maxStatsCache bounds the stats file read (it is another program's file).
const maxStatsCache = 64 << 20

// ReadTokens evaluates the token budget for date (YYYY-MM-DD, host local)
// from the stats file at path: today's tokens of every model, split 70 %
// input / 30 % output (seed 000), priced per million tokens, and compared
// with the daily budget. A missing or unreadable file gives status unknown
// and the error explaining why.
func ReadTokens(path, date string, c *config.Chamberlain) (health.Tokens, error) {
	unknown := health.Tokens{Status: health.TokenUnknown}
	if !c.TokenLimits.Enabled {
		return unknown, nil
	}
	b, err := queue.ReadLimited(path, maxStatsCache)
	if err != nil {
		return unknown, fmt.Errorf("read token stats %s: %w", path, err)
	}
	var sc statsCache
	if err := json.Unmarshal(b, &sc); err != nil {
		return unknown, fmt.Errorf("decode token stats %s: %w", path, err)
	}
	var sum float64
	for _, d := range sc.DailyModelTokens {
		if d.Date != date {
			continue
		}
		for _, n := range d.TokensByModel {
			if n > 0 && !math.IsInf(n, 0) {
				sum += n
			}
		}
	}
	in := int64(math.Round(sum * 0.7))
	out := int64(math.Round(sum * 0.3))
	cost := round2((float64(in)*c.Pricing.InputPerMTok + float64(out)*c.Pricing.OutputPerMTok) / 1e6)
	return health.Tokens{
		Status:            health.EvaluateTokens(cost, c.TokenLimits.DailyBudgetUSD, c.TokenLimits.WarningPct, c.TokenLimits.CriticalPct),
		DailyCostUSD:      cost,
		DailyInputTokens:  in,
		DailyOutputTokens: out,
	}, nil
}
