package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

func TestEngineResultSchema_DerivedFromRawResult(t *testing.T) {
	for _, strict := range []bool{false, true} {
		b, err := doc.EngineResultSchema(strict)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "$ref") || strings.Contains(string(b), "task_id") {
			t.Fatalf("strict=%v: schema still has refs or task_id: %s", strict, b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		props := m["properties"].(map[string]any)
		for _, f := range []string{"status", "summary", "question", "reason", "proclamation"} {
			if _, ok := props[f]; !ok {
				t.Errorf("strict=%v: property %s missing", strict, f)
			}
		}
		for _, f := range []string{"session_id", "retry_count", "usage", "cost_usd", "error_reason", "terminal"} {
			if _, ok := props[f]; ok {
				t.Errorf("strict=%v: soldier field %s offered to the agent", strict, f)
			}
		}
		if strict {
			if m["additionalProperties"] != false {
				t.Errorf("strict schema is open")
			}
			if len(m["required"].([]any)) != len(props) {
				t.Errorf("strict schema: required %v does not list every property", m["required"])
			}
			if _, ok := props["metrics"]; ok {
				t.Errorf("strict schema keeps the free-form metrics object")
			}
			q := props["question"].(map[string]any)
			if typ, _ := q["type"].([]any); len(typ) != 2 || typ[1] != "null" {
				t.Errorf("optional property not nullable: %v", q)
			}
		}
	}
}

func TestStripNulls_MakesStrictOutputARawResult(t *testing.T) {
	m := map[string]any{"task_id": "task-20260101-001", "status": "success", "summary": "ok", "question": nil, "proclamation": nil}
	doc.StripNulls(m)
	b, _ := json.Marshal(m)
	if _, err := DecodeRawResult(b); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// The agent asks for its side effects in the structured output (SPEC
// §12.3); the strict form codex needs closes every output object and
// requires its fields (the agent leaves the unused ones empty).
func TestEngineResultSchema_OffersOutputs(t *testing.T) {
	for _, strict := range []bool{false, true} {
		b, err := doc.EngineResultSchema(strict)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out, ok := m["properties"].(map[string]any)["outputs"].(map[string]any)
		if !ok {
			t.Fatalf("strict=%v: no outputs property", strict)
		}
		items := out["items"].(map[string]any)
		props := items["properties"].(map[string]any)
		for _, f := range []string{"kind", "event", "body", "comments", "branch_suffix", "message", "title"} {
			if _, ok := props[f]; !ok {
				t.Errorf("strict=%v: output field %s missing", strict, f)
			}
		}
		if strict {
			if items["additionalProperties"] != false || len(items["required"].([]any)) != len(props) {
				t.Errorf("strict output item not closed: %v", items)
			}
			if !strings.Contains(string(b), `"enum":["COMMENT","REQUEST_CHANGES",""]`) {
				t.Errorf("strict schema lost the review event enum: %s", b)
			}
		}
	}
}
