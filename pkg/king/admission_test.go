package king

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// admitWant is the admission table of SPEC §4.4 / seed 000, written out
// from the spec's words: health green accepts all, yellow only high,
// orange/red none; tokens ok → health decides; warning → only high or
// health green; critical → only high; unknown → as ok.
func admitWant(h, token, prio string) bool {
	healthOK := h == "green" || (h == "yellow" && prio == "high")
	var tokenOK bool
	switch token {
	case "ok", "unknown", "":
		tokenOK = true
	case "warning":
		tokenOK = prio == "high" || h == "green"
	case "critical":
		tokenOK = prio == "high"
	}
	return healthOK && tokenOK
}

func TestKing_AdmissionMatrix(t *testing.T) {
	for _, h := range []string{"green", "yellow", "orange", "red"} {
		for _, token := range []string{"ok", "warning", "critical", "unknown"} {
			for _, prio := range []string{"high", "normal", "low"} {
				t.Run(fmt.Sprintf("%s/%s/%s", h, token, prio), func(t *testing.T) {
					f := newFixture(t, genPR)
					f.resources(h, token, t0.Add(-30*time.Second))
					f.event("evt-1", "github.issue.assigned", prio)
					f.tick()
					dispatched := len(f.ids(layout.QEvents, layout.Dispatched)) == 1
					if want := admitWant(h, token, prio); dispatched != want {
						t.Fatalf("dispatched = %v, want %v", dispatched, want)
					}
					if !dispatched {
						// Deferred: untouched in pending/, no task.
						eqList(t, "pending", f.ids(layout.QEvents, layout.Pending), "evt-1")
						eqList(t, "tasks", f.ids(layout.QTasks, layout.Pending))
					}
				})
			}
		}
	}
}

func TestKing_AdmissionStalenessAndMissingFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		write   bool
		age     time.Duration
		tokens  string
		admitLo bool
	}{
		{"missing file is green", false, 0, "", true},
		{"fresh green", true, 119 * time.Second, "ok", true},
		{"stale green is orange", true, 121 * time.Second, "ok", false},
		{"green without tokens is unknown", true, 10 * time.Second, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, genPR)
			if c.write {
				f.resources("green", c.tokens, t0.Add(-c.age))
			}
			f.event("evt-lo", "github.issue.assigned", "low")
			f.event("evt-hi", "github.issue.assigned", "high")
			f.tick()
			n := len(f.ids(layout.QEvents, layout.Dispatched))
			want := 0
			if c.admitLo {
				want = 2
			}
			eq(t, "dispatched", n, want)
		})
	}
	t.Run("deferred event dispatched once health recovers", func(t *testing.T) {
		f := newFixture(t, genPR)
		f.resources("green", "ok", t0.Add(-200*time.Second))
		f.event("evt-1", "github.issue.assigned", "normal")
		f.tick()
		eqList(t, "pending while stale", f.ids(layout.QEvents, layout.Pending), "evt-1")
		f.resources("green", "ok", t0)
		f.tick()
		eqList(t, "dispatched after refresh", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	})
}

func TestKing_ConcurrencyCapCountsPendingInProgressAndPetitions(t *testing.T) {
	f := newFixture(t, genPR, genHerald)
	f.cfg.Concurrency.MaxSoldiers = 4
	// Already in flight: one task in progress, one petition running.
	writeJSON(t, f.l.QueueState(layout.QTasks, layout.InProgress)+"/task-20261120-001.json",
		doc.Task{ID: "task-20261120-001", EventID: "evt-old", TargetGeneral: "gen-pr", Type: "github.issue.assigned",
			Priority: "normal", CreatedAt: "2026-11-20T10:00:00Z", Status: doc.TaskInProgress})
	f.event("evt-slack-msg-1", "slack.channel.message", "normal", withSource("slack"))
	os.Rename(f.l.QueueState(layout.QEvents, layout.Pending)+"/evt-slack-msg-1.json",
		f.l.QueueState(layout.QEvents, layout.Petitioning)+"/evt-slack-msg-1.json")
	writeJSONRaw(t, f.k.petitionStartedPath("evt-slack-msg-1"), "2026-11-21T10:00:00Z\n")
	for i := range 5 {
		f.event(fmt.Sprintf("evt-%d", i), "github.issue.assigned", "high", withCreated(t0.Add(time.Duration(i)*time.Second)))
	}
	f.tick()
	// 4 - 2 in flight = 2 admitted within the tick, counted up as they go.
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-0", "evt-1")
	eqList(t, "still pending", f.ids(layout.QEvents, layout.Pending), "evt-2", "evt-3", "evt-4")
	f.tick()
	eq(t, "no more while full", len(f.ids(layout.QEvents, layout.Dispatched)), 2)
}

// The tick's admission decision on its own: the operator's pause, the
// health table (pkg/health), then the concurrency cap, each naming itself
// (a pkg/waits reason and a sentence with its figure) when it refuses.
func TestAdmission_HoldNamesReasonAndFigure(t *testing.T) {
	green := health.Snapshot{Health: health.Green, TokenStatus: "ok"}
	pause := &hold{reason: waits.Pause, detail: "paused by operator"}
	disk := &hold{reason: waits.Health, detail: "disk low"}
	orange := health.Snapshot{Health: health.Orange, TokenStatus: "ok",
		Resources: &health.Resources{System: health.SystemStats{CPUPercent: 12, MemoryPercent: 91}}}
	for _, c := range []struct {
		name       string
		a          admission
		prio       string
		wantReason string // "" when accepted
		wantDetail string // substring of the detail
	}{
		{"green with room", admission{snap: green, inFlight: 2, max: 3}, "normal", "", ""},
		{"cap reached", admission{snap: green, inFlight: 3, max: 3}, "high", waits.MaxSoldiers, "3 tasks in flight, max_soldiers 3"},
		{"paused", admission{snap: green, max: 3, paused: pause}, "high", waits.Pause, "paused by operator"},
		{"pause wins over health", admission{snap: health.Snapshot{Health: health.Red}, max: 3, paused: disk}, "high", waits.Health, "disk low"},
		{"yellow refuses normal", admission{snap: health.Snapshot{Health: health.Yellow, TokenStatus: "ok"}, max: 3}, "normal", waits.Health, "yellow"},
		{"orange names its figure", admission{snap: orange, max: 3}, "high", waits.Health, "health orange (cpu 12%, memory 91%) admits nothing"},
		{"yellow admits high", admission{snap: health.Snapshot{Health: health.Yellow, TokenStatus: "ok"}, max: 3}, "high", "", ""},
		{"critical tokens admit only high", admission{snap: health.Snapshot{Health: health.Green, TokenStatus: "critical"}, max: 3}, "normal", waits.Budget, "critical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.a.holdFor(c.prio, "")
			eq(t, "accept", c.a.acceptFor(c.prio, ""), c.wantReason == "")
			if c.wantReason == "" {
				if h != nil {
					t.Errorf("hold = %+v, want none", h)
				}
				return
			}
			if h == nil || h.reason != c.wantReason || !strings.Contains(h.detail, c.wantDetail) {
				t.Errorf("hold = %+v, want reason %s naming %q", h, c.wantReason, c.wantDetail)
			}
		})
	}
}

// acceptFor reports whether a task of priority for general ("" = not yet
// known) may start now.
func (a *admission) acceptFor(priority, general string) bool {
	return a.holdFor(priority, general) == nil
}
