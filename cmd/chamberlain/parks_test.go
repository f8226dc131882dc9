package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// A park is a warning of --once: exit 1 (never 2) with the park and its
// evidence named, in the table and in --json's verdict, until it lifts.
func TestOnce_AParkIsAWarning(t *testing.T) {
	l := setup(t)
	everyRoleUp(t, l)
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := kv.OnStore(st)
	since := time.Now().Add(-5 * time.Minute)
	p := parks.Park{Kind: parks.General, Name: "gen-pr", Since: since, Until: since.Add(time.Hour),
		Reason: "5 failures alike within an hour", Evidence: parks.Evidence{Count: 5, Fingerprint: "gen-pr|failed|engine",
			Last: []parks.Attempt{{TaskID: "task-20261124-001", At: since, Status: "failed", ErrorReason: "EngineError", Error: "exit 1"}}}}
	if err := kv.PutJSON(t.Context(), s, kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
		t.Fatal(err)
	}
	out, code := runOnce(t, "--base-dir", l.Base, "--once")
	if code != 1 || !strings.Contains(out, "PARKED") || !strings.Contains(out, "task-20261124-001 failed EngineError: exit 1") ||
		!strings.Contains(out, "start unpark gen-pr") {
		t.Fatalf("parked: exit %d, want 1 with the park shown\n%s", code, out)
	}
	out, code = runOnce(t, "--base-dir", l.Base, "--once", "--json")
	var doc struct {
		Verdict struct {
			Exit     int                              `json:"exit"`
			Problems []struct{ Check, Reason string } `json:"problems"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if code != 1 || doc.Verdict.Exit != 1 || len(doc.Verdict.Problems) != 1 || doc.Verdict.Problems[0].Check != "park" ||
		!strings.Contains(doc.Verdict.Problems[0].Reason, "general gen-pr parked since") {
		t.Fatalf("--json: exit %d, verdict %+v", code, doc.Verdict)
	}
	s.Delete(t.Context(), kv.NSParks, parks.Key(p.Kind, p.Name))
	if out, code = runOnce(t, "--base-dir", l.Base, "--once"); code != 0 {
		t.Fatalf("after the lift: exit %d\n%s", code, out)
	}
}
