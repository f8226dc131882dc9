package operator

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
)

// `start unpark` names a general, or an item by its key; anything else
// is a usage error before any request is filed.
func TestUnparkRequest_Arguments(t *testing.T) {
	for _, c := range []struct {
		args   []string
		target string // "" = refused
	}{
		{[]string{"gen-pr"}, "gen-pr"},
		{[]string{"general", "gen-pr"}, "general:gen-pr"},
		{[]string{"general:gen-pr"}, "general:gen-pr"},
		{[]string{"item", "gh:acme:web:12"}, "item:gh:acme:web:12"},
		{[]string{"item", "acme/web#12"}, "item:gh:acme:web:12"},
		{[]string{"item", "PROJ-12"}, "item:PROJ-12"},
		{[]string{"item", "gen-pr"}, "item:gen-pr"}, // "item" says what it is
		{[]string{"item:jira:PROJ-12"}, "item:jira:PROJ-12"},
		{nil, ""},
		{[]string{"item"}, ""},
		{[]string{"item", "../x"}, ""},
		{[]string{"general", "gen-pr", "extra"}, ""},
		{[]string{"task", "gen-pr"}, ""},
	} {
		req, err := UnparkRequest(c.args)
		if c.target == "" {
			if err == nil {
				t.Errorf("UnparkRequest(%q) = %+v, want refused", c.args, req)
			}
			continue
		}
		if err != nil || req.Action != control.ActionUnpark || req.Target != c.target {
			t.Errorf("UnparkRequest(%q) = %+v, %v; want target %q", c.args, req, err, c.target)
		}
	}
}

// A park is shown with its evidence and is a warning of the verdict
// (degraded, never down); the JSON document carries the same.
func TestStatus_ParksWithEvidenceAreAWarning(t *testing.T) {
	l := layout.New(t.TempDir())
	sh := filesShared(t, l)
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.Local)
	gen := parks.Park{Kind: parks.General, Name: "gen-pr", Since: now.Add(-10 * time.Minute), Until: now.Add(50 * time.Minute),
		Reason: "5 failures alike within an hour", CanariesFailed: 1,
		Evidence: parks.Evidence{Count: 5, Fingerprint: "gen-pr|failed|engine", Last: []parks.Attempt{
			{TaskID: "task-20261124-007", Attempt: 1, At: now.Add(-11 * time.Minute), Status: "failed", ErrorReason: "EngineError", Error: "exit 1: boom"}}}}
	item := parks.Park{Kind: parks.Item, Name: "gh:acme:web:12", Since: now.Add(-time.Hour), Until: now.Add(23 * time.Hour),
		Reason: "8 attempts within 24 h", Evidence: parks.Evidence{Count: 8}}
	for _, p := range []parks.Park{gen, item} {
		if err := kv.PutJSON(t.Context(), sh.KV, kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
			t.Fatal(err)
		}
	}
	st := &Status{Threshold: time.Minute, At: now, Parks: readParks(t.Context(), sh.KV),
		Kingdom: Kingdom{StartPID: 1, Health: health.Snapshot{Health: health.Green}}}
	v := st.Verdict()
	ps := problemsOf(v)
	if v.Exit != StatusDegraded || strings.Count(ps, "park: ") != 2 ||
		!strings.Contains(ps, "general gen-pr parked since") || !strings.Contains(ps, "`start unpark item gh:acme:web:12` lifts it") {
		t.Errorf("verdict %d:\n%s", v.Exit, ps)
	}
	var b bytes.Buffer
	st.Parks.print(&b, now)
	for _, want := range []string{
		"general gen-pr since 19:50: 5 failures alike within an hour",
		"one canary task runs after 20:50 (1 canaries failed); lift now: start unpark gen-pr",
		"evidence: 5 × gen-pr|failed|engine",
		"task-20261124-007 attempt 1 at 19:49: failed EngineError — exit 1: boom",
		"item gh:acme:web:12 since 19:00: 8 attempts within 24 h",
		"its window lets an attempt in again at 2026-11-25 19:00; lift now: start unpark item gh:acme:web:12",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	d := st.Document(now)
	if len(d.Parks) != 2 || d.Parks[0].Key != "general:gen-pr" || d.Parks[0].Count != 5 || len(d.Parks[0].Last) != 1 ||
		d.Parks[1].Unpark != "start unpark item gh:acme:web:12" || d.Parks[1].Last == nil {
		t.Errorf("parks doc %+v", d.Parks)
	}

	// No parks: nothing raised, an empty list.
	none := &Status{Threshold: time.Minute, At: now, Parks: readParks(t.Context(), filesShared(t, layout.New(t.TempDir())).KV),
		Kingdom: Kingdom{StartPID: 1, Health: health.Snapshot{Health: health.Green}}}
	if v := none.Verdict(); v.Exit != StatusOK || none.Document(now).Parks == nil {
		t.Errorf("no parks: verdict %+v", v)
	}
}
