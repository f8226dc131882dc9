package chamberlain

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Token statuses (seed 000 "토큰 상태 레벨").
const (
	TokenOK       = health.TokenOK
	TokenWarning  = health.TokenWarning
	TokenCritical = health.TokenCritical
	TokenUnknown  = health.TokenUnknown
)

// Tokens is resources.json's tokens object.
type Tokens = health.Tokens

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
		Status:            health.EvaluateTokens(cost, c.TokenLimits.DailyBudgetUSD, c.TokenLimits.WarningPct, c.TokenLimits.CriticalPct),
		DailyCostUSD:      cost,
		DailyInputTokens:  in,
		DailyOutputTokens: out,
	}, nil
}
