package chamberlain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/parks"
)

// A park read from the store is a warning of the verdict with its
// evidence (degraded, never down, however many), in the table too; the
// chamberlain sends no alert of its own (the king's is the one).
func TestVerdict_ParkIsAWarningWithItsEvidence(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	e := newEnv(t, now)
	p := parks.Park{Kind: parks.General, Name: "gen-pr", Since: now.Add(-10 * time.Minute), Until: now.Add(50 * time.Minute),
		Reason: "5 failures alike within an hour", Evidence: parks.Evidence{Count: 5, Fingerprint: "gen-pr|failed|engine",
			Last: []parks.Attempt{{TaskID: "task-20261121-001", At: now.Add(-11 * time.Minute), Status: "failed", ErrorReason: "EngineError", Error: "exit 1"}}}}
	item := parks.Park{Kind: parks.Item, Name: "gh:acme:web:12", Since: now.Add(-time.Hour), Until: now.Add(23 * time.Hour),
		Reason: "8 attempts within 24 h", Evidence: parks.Evidence{Count: 8}}
	for _, pk := range []parks.Park{p, item} {
		if err := kv.PutJSON(t.Context(), kv.OnStore(e.st), kv.NSParks, parks.Key(pk.Kind, pk.Name), pk); err != nil {
			t.Fatal(err)
		}
	}
	r := e.role(ModeDaemon)
	e.tick(r)
	rep := r.Last
	if len(rep.Parks) != 2 {
		t.Fatalf("parks read %+v", rep.Parks)
	}
	var reasons []string
	for _, pr := range rep.Verdict().Problems {
		if pr.Check == "park" {
			reasons = append(reasons, pr.Reason)
		}
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], "general gen-pr parked since") ||
		!strings.Contains(reasons[0], "last: task-20261121-001 failed EngineError: exit 1") ||
		!strings.Contains(reasons[0], "`start unpark gen-pr` lifts it") ||
		!strings.Contains(reasons[1], "`start unpark item gh:acme:web:12` lifts it") {
		t.Errorf("park problems %q", reasons)
	}
	var b bytes.Buffer
	if err := rep.Table(&b); err != nil || !strings.Contains(b.String(), "PARKED") || !strings.Contains(b.String(), "general gen-pr parked since") {
		t.Errorf("table %v:\n%s", err, b.String())
	}
	for _, m := range e.messages() {
		if strings.Contains(m.Content, "park") || strings.Contains(m.ID, "park") {
			t.Errorf("the chamberlain alerted a park: %+v", m)
		}
	}

	// Everything else well: the parks alone make it 1, never 2.
	up := func(name string) RoleStatus { return RoleStatus{Name: name, State: RoleOK, Session: true} }
	well := Report{Health: Green, Roles: []RoleStatus{up("sentinel"), up("king"), up("envoy"), up("chamberlain")}, Parks: rep.Parks}
	if v := well.Verdict(); v.Exit != VerdictDegraded || len(v.Problems) != 2 {
		t.Errorf("verdict with parks alone %+v", v)
	}
}
