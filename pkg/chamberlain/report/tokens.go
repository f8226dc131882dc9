package report

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

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
		DailyInputTokens:  spend.AddTokens(spend.AddTokens(u.InputTokens, u.CacheReadInputTokens), u.CacheCreationInputTokens),
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
	// Another program's figures: each count is bounded and the sum
	// saturates (spend.MaxTokens), so an absurd count (1e308 is valid
	// JSON) gives a huge but finite, non-negative status, never an
	// overflowed int64.
	var sum int64
	for _, d := range sc.DailyModelTokens {
		if d.Date != date {
			continue
		}
		for _, n := range d.TokensByModel {
			if n > 0 { // NaN cannot come from JSON; negative counts nothing
				sum = spend.AddTokens(sum, int64(math.Round(min(n, spend.MaxTokens))))
			}
		}
	}
	in := int64(math.Round(float64(sum) * 0.7))
	out := sum - in
	cost := round2(spend.AddUSD(float64(in)*c.Pricing.InputPerMTok/1e6, float64(out)*c.Pricing.OutputPerMTok/1e6))
	return health.Tokens{
		Status:            health.EvaluateTokens(cost, c.TokenLimits.DailyBudgetUSD, c.TokenLimits.WarningPct, c.TokenLimits.CriticalPct),
		DailyCostUSD:      cost,
		DailyInputTokens:  in,
		DailyOutputTokens: out,
	}, nil
}
