package king

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func man(name string, subs ...string) *config.Manifest {
	return &config.Manifest{Name: name, Subscribes: subs}
}

func TestRouter_ExactBeatsWildcardAndSpecificityWins(t *testing.T) {
	r := NewRouter([]*config.Manifest{
		man("gen-all", "*"),
		man("gen-pr", "github.pr.*"),
		man("gen-review", "github.pr.review_requested"),
		man("gen-any-review", "github.*.review_requested"),
	})
	for _, c := range []struct{ typ, want string }{
		{"github.pr.review_requested", "gen-review"},        // exact beats both wildcards
		{"github.pr.opened", "gen-pr"},                      // 2 literal segments beat "*"
		{"github.issue.review_requested", "gen-any-review"}, // one-segment middle wildcard
		{"github.issue.assigned", "gen-all"},                // only "*" matches
		{"jira.ticket.assigned", "gen-all"},
		{"github.pr", "gen-all"}, // "github.pr.*" needs at least one more segment
	} {
		got, ok := r.Route(c.typ)
		if !ok || got != c.want {
			t.Errorf("Route(%s) = %q,%v, want %q", c.typ, got, ok, c.want)
		}
	}
	if len(r.Warnings) != 0 {
		t.Errorf("unexpected warnings %v", r.Warnings)
	}
}

func TestRouter_ConflictWarnedAndResolvedByManifestName(t *testing.T) {
	// Given in reverse order: the result must not depend on input order.
	r := NewRouter([]*config.Manifest{
		man("gen-zeta", "github.pr.review_requested", "jira.*"),
		man("gen-alpha", "github.pr.review_requested", "jira.*"),
	})
	for _, typ := range []string{"github.pr.review_requested", "jira.ticket.updated"} {
		if g, _ := r.Route(typ); g != "gen-alpha" {
			t.Errorf("Route(%s) = %q, want gen-alpha (first by name)", typ, g)
		}
	}
	if len(r.Warnings) != 2 {
		t.Fatalf("warnings = %v, want 2 conflicts", r.Warnings)
	}
	if !strings.Contains(r.Warnings[0], "gen-alpha") || !strings.Contains(r.Warnings[0], "gen-zeta") {
		t.Errorf("warning does not name both generals: %q", r.Warnings[0])
	}
}

func TestRouter_NoMatch(t *testing.T) {
	r := NewRouter([]*config.Manifest{man("gen-pr", "github.pr.*")})
	if g, ok := r.Route("jira.ticket.assigned"); ok {
		t.Errorf("Route = %q, want no match", g)
	}
}

func TestKing_UnroutableEventDiscarded(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-jira-QP-1-1", "jira.ticket.assigned", "normal")
	f.tick()
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-jira-QP-1-1")
	eqList(t, "tasks/pending", f.ids(layout.QTasks, layout.Pending))
	d := f.internal("event.discarded")
	if len(d) != 1 {
		t.Fatalf("event.discarded = %d, want 1", len(d))
	}
	m := data(d[0])
	eq(t, "event_id", m["event_id"], any("evt-jira-QP-1-1"))
	eq(t, "event_type", m["event_type"], any("jira.ticket.assigned"))
	if r, _ := m["reason"].(string); !strings.Contains(r, "no general") {
		t.Errorf("reason = %q", r)
	}
}

func TestKing_ManifestReloadedWhenChanged(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-jira-a", "jira.ticket.assigned", "normal")
	f.tick()
	eqList(t, "discarded", f.ids(layout.QEvents, layout.Completed), "evt-jira-a")

	f.writeManifest("name: gen-jira\ndescription: Tickets.\nsubscribes: [jira.ticket.*]\n")
	// mtime granularity: make sure the change is visible even on coarse clocks.
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(f.l.GeneralManifest("gen-jira"), future, future)
	f.event("evt-jira-b", "jira.ticket.assigned", "normal")
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-jira-b")
	_, target := f.eventFile(layout.Dispatched, "evt-jira-b")
	eq(t, "target", target, "gen-jira")

	// Uninstall: routing forgets the general.
	os.Remove(f.l.GeneralManifest("gen-jira"))
	f.event("evt-jira-c", "jira.ticket.assigned", "normal")
	f.tick()
	eqList(t, "completed", f.ids(layout.QEvents, layout.Completed), "evt-jira-a", "evt-jira-c")
}
