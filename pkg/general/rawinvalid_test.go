package general

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// soldier-spawn publishes an agent's staging result without validating
// it; the general rejects one that breaks the raw-result schema as a
// failed InvalidResult naming the staging file and the broken rule, and
// keeps what the soldier measured (session, usage).
func TestGeneral_InvalidAgentResultNamesFileAndRuleAndKeepsUsage(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "bad_status", "session_id": "5e55a0b1-0000-4000-8000-000000000003"})
	e.start()
	const id = "task-20260101-004"
	e.task(id)
	r := e.final(id)
	want := "agent result " + e.l.ResultStaging(id) + ": raw-result: at '/status': "
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonInvalidResult || !strings.Contains(r.Error, want) {
		t.Fatalf("final = status %s reason %s error %q; want failed InvalidResult ~%q", r.Status, r.ErrorReason, r.Error, want)
	}
	if r.Usage == nil || r.Usage.InputTokens != 7 || r.Usage.OutputTokens != 3 {
		t.Errorf("usage %+v, want the engine's 7/3 kept", r.Usage)
	}
	if r.SessionID != "5e55a0b1-0000-4000-8000-000000000003" {
		t.Errorf("session %q not kept", r.SessionID)
	}
}

func TestInvalidRaw_OriginAndKeptFieldsAreCheckedThemselves(t *testing.T) {
	err := schema.Validate(doc.KindRawResult, []byte(`{"task_id":"task-20260101-001","status":"done","summary":"x"}`))
	cases := []struct {
		name, doc, errPrefix string
		usage                bool
	}{
		{"no origin", `{"status":"done","usage":{"input_tokens":1,"output_tokens":2}}`, "raw result: ", true},
		{"origin", `{"origin":"agent structured output","status":"done"}`, "agent structured output: ", false},
		{"origin not a string", `{"origin":5}`, "raw result: ", false},
		{"broken usage dropped", `{"origin":"x","usage":{"input_tokens":-1}}`, "x: ", false},
		{"not JSON", `{nope`, "raw result: ", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(c.doc), &m)
			r := invalidRaw("task-20260101-001", m, err)
			if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonInvalidResult ||
				!strings.HasPrefix(r.Error, c.errPrefix+err.Error()) || r.Summary != r.Error {
				t.Errorf("got %+v, want error %q", r, c.errPrefix+err.Error())
			}
			if (r.Usage != nil) != c.usage {
				t.Errorf("usage %+v, want kept: %v", r.Usage, c.usage)
			}
		})
	}
}

// SPEC §10.1: structured output > a *valid* staging file. The soldier
// publishes the structured output with the staging result beside it; the
// general takes the fallback when the structured output fails the schema
// (keeping the attempt's session, usage and cost), and the structured one
// when it passes.
func TestReadRaw_InvalidStructuredOutputFallsBackToAValidStagingResult(t *testing.T) {
	e := newEnv(t)
	const id = "task-20260101-005"
	write := func(raw string) {
		if err := os.WriteFile(e.l.ResultRaw(id), []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fallback := `{"task_id":"` + id + `","status":"success","summary":"from staging","origin":"agent result x"}`
	write(`{"task_id":"` + id + `","status":"done","summary":"structured","origin":"agent structured output",` +
		`"session_id":"5e55a0b1-0000-4000-8000-000000000005","usage":{"input_tokens":4,"output_tokens":2},"fallback":` + fallback + `}`)
	g := e.start()
	r := g.readRaw(id)
	if r.Status != doc.ResultSuccess || r.Summary != "from staging" {
		t.Fatalf("took %s %q, want the valid staging fallback", r.Status, r.Summary)
	}
	if r.SessionID != "5e55a0b1-0000-4000-8000-000000000005" || r.Usage == nil || r.Usage.InputTokens != 4 {
		t.Errorf("session %q usage %+v: the attempt's figures not kept", r.SessionID, r.Usage)
	}
	write(`{"task_id":"` + id + `","status":"success","summary":"structured","fallback":` + fallback + `}`)
	if r := g.readRaw(id); r.Summary != "structured" {
		t.Errorf("a valid structured output lost to its fallback: %q", r.Summary)
	}
	write(`{"task_id":"` + id + `","status":"done","summary":"structured","origin":"agent structured output","fallback":{"task_id":"` + id + `","status":"nope"}}`)
	if r := g.readRaw(id); r.ErrorReason != doc.ReasonInvalidResult || !strings.Contains(r.Error, "agent structured output: ") {
		t.Errorf("both invalid: %s %q, want InvalidResult naming the structured output", r.ErrorReason, r.Error)
	}
}
