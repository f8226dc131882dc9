package schema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/schemas"
)

// An absurd cost or token count (the command engine and unpriced codex
// pass the agent's own figure) is clamped to its bound and noted: the
// result still decodes, so the task's outcome is not lost to
// InvalidResult. A count past int64 used to fail the decode; 1e300 dollars
// passed through and made the day's total +Inf.
func TestDecodeResult_AbsurdFiguresClampedAndNoted(t *testing.T) {
	raw := `{"task_id": "task-20261121-001", "status": "success", "summary": "done",
		"cost_usd": 1e300, "metrics": {"files": 3},
		"usage": {"input_tokens": 1e20, "output_tokens": 5, "cache_read_input_tokens": 1e400, "cache_creation_input_tokens": 7}}`
	r, err := schema.DecodeRawResult([]byte(raw))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if r.CostUSD == nil || *r.CostUSD != schema.MaxCostUSD {
		t.Errorf("cost %v, want %v", r.CostUSD, schema.MaxCostUSD)
	}
	if u := r.Usage; u == nil || u.InputTokens != schema.MaxTokens || u.OutputTokens != 5 || u.CacheReadInputTokens != schema.MaxTokens || u.CacheCreationInputTokens != 7 {
		t.Errorf("usage %+v", r.Usage)
	}
	notes, _ := r.Metrics[schema.ClampedMetric].([]any)
	if len(notes) != 3 || r.Metrics["files"] != float64(3) {
		t.Fatalf("metrics %v, want the agent's own and 3 clamp notes", r.Metrics)
	}
	if n := notes[0].(string); !strings.Contains(n, "cost_usd 1e300") || !strings.Contains(n, "counted as 1e+06") {
		t.Errorf("first note %q", n)
	}
	if r.Status != doc.ResultSuccess || r.Summary != "done" {
		t.Errorf("outcome lost: %+v", r)
	}

	final := `{"task_id": "task-20261121-001", "status": "failed", "summary": "x", "error": "boom", "error_reason": "AgentFailed",
		"general": "gen-pr", "duration_seconds": 3, "completed_at": "2026-11-21T10:00:00Z", "retry_count": 0, "cost_usd": 2e6}`
	res, err := schema.DecodeResult([]byte(final))
	if err != nil {
		t.Fatalf("decode final: %v", err)
	}
	if res.CostUSD == nil || *res.CostUSD != schema.MaxCostUSD || res.RetryCount != 0 || res.General != "gen-pr" {
		t.Errorf("final result %+v", res)
	}
	if notes, _ := res.Metrics[schema.ClampedMetric].([]any); len(notes) != 1 {
		t.Errorf("final result metrics %v, want one note", res.Metrics)
	}
}

// Figures in range are left alone: no note, no metrics added; a negative
// one is still refused by the schema.
func TestDecodeResult_FiguresInRangeUntouched(t *testing.T) {
	raw := `{"task_id": "task-20261121-001", "status": "success", "summary": "done", "cost_usd": 1000000,
		"usage": {"input_tokens": 1000000000000, "output_tokens": 0}}`
	r, err := schema.DecodeRawResult([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if r.Metrics != nil || *r.CostUSD != 1e6 || r.Usage.InputTokens != 1e12 {
		t.Errorf("in-range result changed: %+v metrics %v", r, r.Metrics)
	}
	if err := schema.Validate(doc.KindRawResult, []byte(raw)); err != nil {
		t.Error(err)
	}
	neg := `{"task_id": "task-20261121-001", "status": "success", "summary": "done", "cost_usd": -1}`
	if _, err := schema.DecodeRawResult([]byte(neg)); !errors.Is(err, doc.ErrInvalid) {
		t.Errorf("negative cost: %v, want ErrInvalid", err)
	}
}

// The schemas publish the bounds the decoder clamps to.
func TestSchemas_MoneyBoundsAreTheGoConstants(t *testing.T) {
	b, err := schemas.FS.ReadFile("defs.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Defs map[string]struct {
			Maximum *float64 `json:"maximum"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if m := d.Defs["costUSD"].Maximum; m == nil || *m != schema.MaxCostUSD {
		t.Errorf("costUSD maximum %v, want %v", m, schema.MaxCostUSD)
	}
	if m := d.Defs["tokenCount"].Maximum; m == nil || *m != schema.MaxTokens {
		t.Errorf("tokenCount maximum %v, want %v", m, schema.MaxTokens)
	}
}
