package spend

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

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

// UnmarshalJSON reads token counts, bounding each to [0, MaxTokens]: a
// count past int64 (1e20) would otherwise make the whole record unreadable
// and its cost forgotten.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var raw struct {
		In  json.Number `json:"input_tokens"`
		Out json.Number `json:"output_tokens"`
		CR  json.Number `json:"cache_read_input_tokens"`
		CC  json.Number `json:"cache_creation_input_tokens"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode usage: %w", err)
	}
	var v Usage
	for _, f := range []struct {
		n   json.Number
		dst *int64
	}{{raw.In, &v.InputTokens}, {raw.Out, &v.OutputTokens}, {raw.CR, &v.CacheReadInputTokens}, {raw.CC, &v.CacheCreationInputTokens}} {
		n, err := tokenCount(f.n)
		if err != nil {
			return fmt.Errorf("decode usage: %w", err)
		}
		*f.dst = n
	}
	*u = v
	return nil
}

// tokenCount reads one JSON number as a bounded token count; "" (absent,
// null) is 0.
func tokenCount(n json.Number) (int64, error) {
	if n == "" {
		return 0, nil
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return clampTokens(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !math.IsInf(f, 0) { // out of float64's range is +-Inf: bounded below
		return 0, err
	}
	return int64(min(max(f, 0), MaxTokens)), nil
}
