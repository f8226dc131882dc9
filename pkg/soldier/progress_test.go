package soldier

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/engine"
)

// The general's brakes (SPEC §12.4) read what the soldier records as the
// engine's output arrives: every line that is progress touches the
// heartbeat (an engine event; claude's api_retry lines are not), and the
// spent record follows claude's per-message usage before any result
// line (the burn).
func TestLineWriter_RecordsEventsAndSpendAsTheStreamArrives(t *testing.T) {
	dir := t.TempDir()
	hb, spent := filepath.Join(dir, "hb"), filepath.Join(dir, "usage.json")
	w := &lineWriter{log: io.Discard, hb: hb, parser: engine.NewParser(config.EngineClaude),
		spent: &spentRecord{path: spent, sys: config.DefaultSystem(), engine: config.EngineClaude}}
	old := time.Unix(1_000_000, 0)
	stale := func() {
		t.Helper()
		if err := os.WriteFile(hb, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(hb, old, old); err != nil {
			t.Fatal(err)
		}
	}
	touched := func() bool {
		st, err := os.Stat(hb)
		return err == nil && !st.ModTime().Equal(old)
	}
	stale()
	fmt.Fprintln(w, `{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}`)
	for i := 1; i <= 3; i++ {
		stale()
		fmt.Fprintf(w, `{"type":"assistant","message":{"id":"msg_%d","usage":{"input_tokens":1000,"output_tokens":500},"content":[{"type":"tool_use"}]}}`+"\n", i)
		if !touched() {
			t.Fatalf("message %d did not touch the heartbeat", i)
		}
		sp, ok := engine.ReadSpent(spent)
		if !ok || sp.Usage.InputTokens != int64(1000*i) || sp.Usage.OutputTokens != int64(500*i) || sp.CostUSD == nil {
			t.Fatalf("after message %d the spent record is %+v (%v), want %d/%d tokens, priced", i, sp, ok, 1000*i, 500*i)
		}
	}
	stale()
	fmt.Fprintln(w, `{"type":"system","subtype":"api_retry","error":"overloaded"}`)
	if touched() {
		t.Error("an api_retry line touched the heartbeat: a CLI retrying by itself is no progress")
	}
}
