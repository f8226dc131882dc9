package spend

import (
	"math"

	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Bounds of every figure the ledger holds and every sum it makes (SPEC
// §10.6). An engine or an agent may report anything (the command engine
// and unpriced codex pass the agent's own cost); a figure past its bound
// counts as the bound, and a sum stops there, so no total ever becomes
// +Inf or NaN, which JSON cannot carry and which would refuse every task.
// They are the JSON Schemas' bounds (schemas/defs.json), one attempt's
// figures: a day past them is past any budget anyway.
const (
	MaxUSD    = schema.MaxCostUSD // dollars
	MaxTokens = schema.MaxTokens  // tokens of one kind, or a Usage's total
)

// ClampUSD bounds one dollar figure to [0, MaxUSD]; NaN and negative
// figures count as 0.
func ClampUSD(v float64) float64 {
	switch {
	case !(v > 0): // NaN, negative or zero
		return 0
	case v > MaxUSD:
		return MaxUSD
	}
	return v
}

// AddUSD is a + b, each clamped (ClampUSD), saturating at MaxUSD and
// rounded to the nano-dollar: 0.95 + 0.10 is 1.05, and the rounding of
// thousands of attempts stays far below a cent.
func AddUSD(a, b float64) float64 {
	s := ClampUSD(a) + ClampUSD(b)
	if s >= MaxUSD {
		return MaxUSD
	}
	return math.Round(s*1e9) / 1e9
}

// AddTokens is a + b, each bounded to [0, MaxTokens], saturating at
// MaxTokens (the operands are bounded, so the sum cannot overflow).
func AddTokens(a, b int64) int64 {
	return min(clampTokens(a)+clampTokens(b), MaxTokens)
}

func clampTokens(n int64) int64 { return min(max(n, 0), MaxTokens) }
