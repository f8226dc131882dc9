package chamberlain

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Token statuses (seed 000 "토큰 상태 레벨").
const (
	TokenOK       = "ok"
	TokenWarning  = "warning"
	TokenCritical = "critical"
	TokenUnknown  = "unknown"
)

// Tokens is resources.json's tokens object.
type Tokens struct {
	Status            string  `json:"status"`
	DailyCostUSD      float64 `json:"daily_cost_usd"`
	DailyInputTokens  int64   `json:"daily_input_tokens"`
	DailyOutputTokens int64   `json:"daily_output_tokens"`
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
func ReadTokens(path, date string, c *config.Chamberlain) (Tokens, error) {
	unknown := Tokens{Status: TokenUnknown}
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
	return Tokens{
		Status:            tokenStatus(cost, c.TokenLimits),
		DailyCostUSD:      cost,
		DailyInputTokens:  in,
		DailyOutputTokens: out,
	}, nil
}

// tokenStatus compares a cost with the budget's warning and critical levels
// (≥, as the seed).
func tokenStatus(cost float64, t config.TokenLimits) string {
	switch {
	case cost >= t.DailyBudgetUSD*t.CriticalPct/100:
		return TokenCritical
	case cost >= t.DailyBudgetUSD*t.WarningPct/100:
		return TokenWarning
	}
	return TokenOK
}
