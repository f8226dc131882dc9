package engine

import (
	"math"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// claudePrice is a model's list price in USD per million tokens.
type claudePrice struct {
	in, out, cacheRead, cacheWrite float64
}

// claudePrices are the claude CLI's list prices by model name prefix,
// longest prefix first. The CLI reports total_cost_usd only on its final
// line; an attempt killed before it is priced here, the same way.
// claude-opus-5-5 was measured against the CLI (ENGINES.md's version);
// the others are Anthropic's published prices.
var claudePrices = []struct {
	prefix string
	p      claudePrice
}{
	{"claude-opus-5", claudePrice{4, 20, 0.2, 5}},
	{"claude-opus-4-5", claudePrice{5, 25, 0.5, 6.25}},
	{"claude-opus-4-6", claudePrice{5, 25, 0.5, 6.25}},
	{"claude-opus-4", claudePrice{15, 75, 1.5, 18.75}},
	{"claude-sonnet-4", claudePrice{3, 15, 0.3, 3.75}},
	{"claude-3-7-sonnet", claudePrice{3, 15, 0.3, 3.75}},
	{"claude-haiku-4", claudePrice{1, 5, 0.1, 1.25}},
	{"claude-3-5-haiku", claudePrice{0.8, 4, 0.08, 1}},
}

// ClaudeCost prices usage on model as the claude CLI does; nil when the
// model is not in the table (unpriced: the tokens still count).
func ClaudeCost(model string, u *doc.Usage) *float64 {
	if u == nil {
		return nil
	}
	for _, e := range claudePrices {
		if !strings.HasPrefix(model, e.prefix) {
			continue
		}
		p := e.p
		c := (float64(u.InputTokens)*p.in + float64(u.OutputTokens)*p.out +
			float64(u.CacheReadInputTokens)*p.cacheRead + float64(u.CacheCreationInputTokens)*p.cacheWrite) / 1e6
		c = math.Round(c*1e8) / 1e8
		return &c
	}
	return nil
}
