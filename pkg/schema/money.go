package schema

import (
	"encoding/json"
	"fmt"
	docpkg "github.com/kingdom-dev/kingdom/pkg/doc"
	"strconv"
)

// Bounds of one attempt's figures (schemas/defs.json costUSD and
// tokenCount). An engine or an agent may report anything (the command
// engine and unpriced codex pass the agent's own cost); pkg/spend bounds
// its sums by the same numbers.
const (
	MaxCostUSD = 1e6  // dollars per attempt
	MaxTokens  = 1e12 // tokens of one kind per attempt
)

// ClampedMetric is the key under a result's metrics where Decode notes
// the figures it clamped.
const ClampedMetric = "kingdom_clamped"

// tokenFields are the usage counts bounded by MaxTokens.
var tokenFields = []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}

// clampMoney bounds a raw or final result's cost_usd and usage counts in
// the parsed document: a figure above its bound (or past float64) is set
// to the bound and noted in metrics[ClampedMetric], so an absurd cost is
// still a result (its outcome reaches the user) rather than an
// InvalidResult. A negative figure is left for the schema to refuse, as
// before. It reports whether it changed the document.
func clampMoney(kind docpkg.Kind, doc any) bool {
	if kind != docpkg.KindRawResult && kind != docpkg.KindResult {
		return false
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	var notes []any
	clamp := func(obj map[string]any, key, name string, limit float64) {
		n, ok := obj[key].(json.Number)
		if !ok {
			return // absent, null or not a number: the schema judges it
		}
		f, _ := strconv.ParseFloat(string(n), 64) // past float64's range: ±Inf
		if !(f > limit) {
			return // in range, or negative: the schema's minimum refuses that
		}
		obj[key] = json.Number(strconv.FormatFloat(limit, 'f', -1, 64))
		notes = append(notes, fmt.Sprintf("%s %s above %g: counted as %g", name, n, limit, limit))
	}
	clamp(m, "cost_usd", "cost_usd", MaxCostUSD)
	if u, ok := m["usage"].(map[string]any); ok {
		for _, k := range tokenFields {
			clamp(u, k, "usage."+k, MaxTokens)
		}
	}
	if len(notes) == 0 {
		return false
	}
	met, ok := m["metrics"].(map[string]any)
	if _, present := m["metrics"]; !present {
		met, ok = map[string]any{}, true
		m["metrics"] = met
	}
	if ok {
		met[ClampedMetric] = notes
	}
	return true
}
