package dashboard

import (
	"strings"
	"testing"
)

// The state, the page and /metrics carry the chamberlain's verdict: a
// store that cannot be reached, a lost host, a standby leader role.
func TestState_CarriesTheChamberlainsVerdict(t *testing.T) {
	l := newBase(t)
	v := &Verdict{At: "2026-03-04T10:00:00Z", Exit: 2,
		Problems: []string{"store store unreachable since 2026-03-04 09:58:00 UTC: connection refused", "host host-b lost since 2026-03-04 09:00:00 UTC; `start hosts forget host-b` once it is retired"},
		Roles:    map[string]string{"king": "standby (leader on host-b)"}}
	_, url := startServer(t, Options{Layout: l, Verdict: func() *Verdict { return v }})
	st := state(t, url)
	if st.Verdict == nil || st.Verdict.Exit != 2 || len(st.Verdict.Problems) != 2 || st.Verdict.Roles["king"] != "standby (leader on host-b)" {
		t.Fatalf("state's verdict %+v", st.Verdict)
	}
	_, m := get(t, url+"/metrics")
	if !strings.Contains(m, "kingdom_verdict 2") {
		t.Errorf("/metrics lacks kingdom_verdict 2:\n%s", m)
	}
	_, page := get(t, url+"/")
	if !strings.Contains(page, `id="problems"`) || !strings.Contains(page, "st.verdict") {
		t.Error("the page does not show the verdict's problems")
	}
}
