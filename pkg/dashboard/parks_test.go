package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// The breaker's parks are in the state with their evidence (outside text
// redacted), on the page, and in /metrics: a gauge per kind and one info
// series per park.
func TestParks_StatePageAndMetrics(t *testing.T) {
	l := newBase(t)
	s := kv.OnStore(storeOf(t, l))
	since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	gen := parks.Park{Kind: parks.General, Name: "gen-pr", Since: since, Until: since.Add(time.Hour), CanariesFailed: 1,
		Reason: "5 failures alike within an hour", Evidence: parks.Evidence{Count: 5, Fingerprint: "gen-pr|failed|engine",
			Last: []parks.Attempt{{TaskID: "task-20261124-001", Attempt: 2, At: since.Add(-time.Minute), Status: "failed",
				ErrorReason: "EngineError", Error: "exit 1 token ghp_" + strings.Repeat("a", 36)}}}}
	item := parks.Park{Kind: parks.Item, Name: "gh:acme:web:12", Since: since, Until: since.Add(24 * time.Hour),
		Reason: "8 attempts within 24 h", Evidence: parks.Evidence{Count: 8}}
	for _, p := range []parks.Park{gen, item} {
		if err := kv.PutJSON(t.Context(), s, kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
			t.Fatal(err)
		}
	}
	_, url := startServer(t, Options{Layout: l})

	_, body := get(t, url+"/api/v1/state")
	if err := schema.Validate(doc.KindState, []byte(body)); err != nil {
		t.Fatalf("state does not match schemas/state.json: %v\n%s", err, body)
	}
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Parks) != 2 {
		t.Fatalf("parks %+v", st.Parks)
	}
	g, it := st.Parks[0], st.Parks[1]
	if g.Key != "general:gen-pr" || g.Count != 5 || g.Fingerprint != "gen-pr|failed|engine" || g.Since != "2026-11-24T10:00:00Z" ||
		g.Until != "2026-11-24T11:00:00Z" || g.CanariesFailed != 1 || g.Unpark != "start unpark gen-pr" || len(g.Last) != 1 ||
		g.Last[0].TaskID != "task-20261124-001" || g.Last[0].Attempt != 2 || g.Last[0].ErrorReason != "EngineError" {
		t.Errorf("general park %+v", g)
	}
	if strings.Contains(body, "ghp_aaaa") {
		t.Errorf("a token in the evidence is shown: %s", body)
	}
	if it.Key != "item:gh:acme:web:12" || it.Unpark != "start unpark item gh:acme:web:12" || it.Last == nil {
		t.Errorf("item park %+v", it)
	}

	if _, page := get(t, url+"/"); !strings.Contains(page, `id="parks"`) || !strings.Contains(page, "st.parks") {
		t.Errorf("the page does not show the parks")
	}

	m := scrape(t, url)
	if v := metricValue(t, m, "kingdom_parks", "kind", "general"); v != 1 {
		t.Errorf("kingdom_parks{general} = %v", v)
	}
	if v := metricValue(t, m, "kingdom_parks", "kind", "item"); v != 1 {
		t.Errorf("kingdom_parks{item} = %v", v)
	}
	if v := metricValue(t, m, "kingdom_park_info", "kind", "general", "name", "gen-pr", "fingerprint", "gen-pr|failed|engine"); v != 1 {
		t.Errorf("kingdom_park_info{gen-pr} = %v", v)
	}

	// Lifted: the gauges fall to 0, the info series goes.
	for _, p := range []parks.Park{gen, item} {
		s.Delete(t.Context(), kv.NSParks, parks.Key(p.Kind, p.Name))
	}
	m = scrape(t, url)
	if v := metricValue(t, m, "kingdom_parks", "kind", "general"); v != 0 {
		t.Errorf("kingdom_parks{general} after the lift = %v", v)
	}
	if _, ok := m["kingdom_park_info"]; ok {
		t.Errorf("kingdom_park_info after the lift: %v", m["kingdom_park_info"])
	}
	_, body = get(t, url+"/api/v1/state")
	if !strings.Contains(body, `"parks": []`) {
		t.Errorf("no parks: want an empty list:\n%s", body)
	}
}
