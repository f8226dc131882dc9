package general

import (
	"encoding/json"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// invalidRaw is the failed/InvalidResult for a raw result that fails its
// schema. soldier-spawn publishes an agent's result (its staging file or
// structured output) without validating it — it links no validator, as it
// starts once per task — so this is where a broken agent result is caught.
// The message names where the result came from (doc.RawOrigin, recorded
// by the soldier) and the broken rule, and the attempt's session, usage
// and cost, which the soldier measured itself, are kept when they pass the
// schema on their own.
func invalidRaw(task string, m map[string]json.RawMessage, err error) *doc.RawResult {
	origin := "raw result"
	var s string
	if json.Unmarshal(m[doc.RawOrigin], &s) == nil && s != "" {
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		origin = s
	}
	r := invalid(task, fmt.Sprintf("%s: %v", origin, err))
	keep := map[string]any{"task_id": r.TaskID, "status": r.Status, "summary": r.Summary,
		"error": r.Error, "error_reason": r.ErrorReason}
	n := 0
	for _, k := range []string{"session_id", "usage", "cost_usd"} {
		if v, ok := m[k]; ok {
			keep[k] = v
			n++
		}
	}
	if n == 0 {
		return r
	}
	kb, merr := json.Marshal(keep)
	if merr != nil {
		return r
	}
	if kr, kerr := schema.DecodeRawResult(kb); kerr == nil {
		return kr
	}
	return r
}

// validFallback is the agent's staging result the soldier published beside
// a structured output (doc.RawFallback), when it passes the schema: the
// structured output goes first only when valid (SPEC §10.1). The attempt's
// session, usage and cost, which the soldier measured on the outer result,
// go with it. nil: no fallback, or it fails too.
func validFallback(m map[string]json.RawMessage) *doc.RawResult {
	var fb map[string]json.RawMessage
	if json.Unmarshal(m[doc.RawFallback], &fb) != nil || fb == nil {
		return nil
	}
	for _, k := range []string{"session_id", "usage", "cost_usd"} {
		if v, ok := m[k]; ok {
			fb[k] = v
		}
	}
	fbb, err := json.Marshal(fb)
	if err != nil {
		return nil
	}
	r, err := schema.DecodeRawResult(fbb)
	if err != nil {
		return nil
	}
	return r
}
