package engine

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// A claude run cut off before its result line reports the usage of the
// assistant messages streamed so far: one line per content block repeats
// its message's usage, so each message id counts once; the run is priced
// by the model the init line names.
func TestClaudeParser_KilledRunCountsEachMessageOnce(t *testing.T) {
	p := NewParser("claude")
	for _, l := range []string{
		`{"type":"system","subtype":"init","model":"claude-opus-5-5","session_id":"s"}`,
		`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":13787,"output_tokens":1,"cache_read_input_tokens":10,"cache_creation_input_tokens":5}}}`,
		`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use"}],"usage":{"input_tokens":13787,"output_tokens":1,"cache_read_input_tokens":10,"cache_creation_input_tokens":5}}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result"}]}}`,
		`{"type":"assistant","message":{"id":"msg_2","content":[{"type":"tool_use"}],"usage":{"input_tokens":100,"output_tokens":7}}}`,
	} {
		p.Line([]byte(l))
	}
	o := p.Outcome()
	want := doc.Usage{InputTokens: 13887, OutputTokens: 8, CacheReadInputTokens: 10, CacheCreationInputTokens: 5}
	if o.Usage == nil || *o.Usage != want {
		t.Fatalf("usage %+v, want %+v", o.Usage, want)
	}
	// 13887×4 + 8×20 + 10×0.2 + 5×5 per million (the CLI's opus-5-5 rates).
	if o.CostUSD == nil || *o.CostUSD != 0.055735 {
		t.Fatalf("cost %v, want 0.055735", o.CostUSD)
	}
	// The result line, when it comes, is the run's own total.
	p.Line([]byte(`{"type":"result","subtype":"success","usage":{"input_tokens":1,"output_tokens":2},"total_cost_usd":0.5}`))
	if o := p.Outcome(); o.Usage.InputTokens != 1 || *o.CostUSD != 0.5 {
		t.Fatalf("after the result: usage %+v cost %v", o.Usage, *o.CostUSD)
	}
}

func TestClaudeCost_UnknownModelIsUnpriced(t *testing.T) {
	if c := ClaudeCost("claude-fake", &doc.Usage{InputTokens: 1}); c != nil {
		t.Fatalf("cost %v, want unpriced", *c)
	}
	if c := ClaudeCost("claude-opus-4-1-20250805", &doc.Usage{InputTokens: 1e6}); c == nil || *c != 15 {
		t.Fatalf("opus 4.1: %v", c)
	}
}
