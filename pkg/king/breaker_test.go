package king

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// prEvent drops a review request of acme/web#12 (or another PR).
func (f *fixture) prEvent(id string, pr string) {
	f.t.Helper()
	f.event(id, "github.pr.review_requested", "normal", withRepo("acme/web"),
		withPayload(map[string]any{"pr_number": pr, "subject_url": "https://api.github.com/repos/acme/web/pulls/" + pr}))
}

// runOnce dispatches pending events, claims the task made of event and
// finishes it with status (and reason).
func (f *fixture) runOnce(event, status, reason, errText string) string {
	f.t.Helper()
	f.tick()
	ev, _ := f.eventFile(layout.Dispatched, event)
	f.claim(ev.TaskID)
	r := map[string]any{"status": status}
	if reason != "" {
		r["error_reason"], r["error"] = reason, errText
	}
	f.finalResult(ev.TaskID, r)
	f.tick()
	return ev.TaskID
}

func (f *fixture) parks() []parks.Park {
	f.t.Helper()
	ps, err := parks.List(f.t.Context(), kv.OnStore(f.st))
	if err != nil {
		f.t.Fatal(err)
	}
	return ps
}

// parkMessages lists the park alerts queued in any state.
func (f *fixture) parkMessages() []string {
	f.t.Helper()
	var out []string
	for _, st := range layout.QueueStates[layout.QMessages] {
		for _, id := range f.ids(layout.QMessages, st) {
			if strings.HasPrefix(id, "msg-park-") {
				out = append(out, id)
			}
		}
	}
	return out
}

// unparkRequest files an unpark as `start unpark` does (action and
// target) and returns the king's reply after one tick.
func (f *fixture) unparkRequest(target string) control.Reply {
	f.t.Helper()
	id := fmt.Sprintf("ctl-%d-unpark", f.clk.Now().UnixNano())
	req := map[string]any{"id": id, "action": control.ActionUnpark, "target": target, "by": "alice@host",
		"created_at": doc.FormatTime(f.clk.Now())}
	if err := kv.PutJSON(f.t.Context(), kv.OnStore(f.st), kv.NSControl, id, req); err != nil {
		f.t.Fatal(err)
	}
	f.tick()
	ctx, cancel := context.WithTimeout(f.t.Context(), 60*time.Second)
	defer cancel()
	rep, err := control.WaitReply(ctx, kv.OnStore(f.st), id, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return *rep
}

func TestBreaker_ItemKeys(t *testing.T) {
	repo := doc.StringPtr("acme/web")
	for _, c := range []struct {
		source string
		repo   *string
		p      map[string]any
		want   string
	}{
		{doc.SourceGitHub, repo, map[string]any{"pr_number": "12"}, "gh:acme:web:12"},
		{doc.SourceGitHub, repo, map[string]any{"pr_number": nil, "issue_number": "7"}, "gh:acme:web:7"},
		{doc.SourceGitHub, repo, map[string]any{"pr_number": nil, "thread_id": "99"}, ""}, // a repository-wide notification
		{doc.SourceGitHub, nil, map[string]any{"pr_number": "12"}, ""},
		{doc.SourceJira, nil, map[string]any{"ticket_key": "OPS-42", "summary": "x"}, "jira:OPS-42"},
		{doc.SourceSlack, nil, map[string]any{"channel": "C1", "ts": "1700.2", "thread_ts": nil}, "slack:C1:1700.2"},
		{doc.SourceSlack, nil, map[string]any{"channel": "C1", "ts": "1700.9", "thread_ts": "1700.2"}, "slack:C1:1700.2"},
		{doc.SourceSchedule, repo, map[string]any{"pr_number": "12", "schedule": "nightly"}, ""},
		{doc.SourceJira, nil, map[string]any{"ticket_key": "A/../B"}, ""}, // not a safe id: not capped
		{"", repo, map[string]any{"pr_number": 12.0}, "gh:acme:web:12"},   // a task: the kind from its payload
	} {
		if got := itemKey(c.source, c.repo, c.p); got != c.want {
			t.Errorf("itemKey(%s, %v) = %q, want %q", c.source, c.p, got, c.want)
		}
	}
}

// The same PR re-triggered past max_attempts_per_item (retries included)
// gets one ❌ and no more attempts; another PR is not held; the park lifts
// at the window's end.
func TestBreaker_ItemPastItsCapIsParkedWithOneAlert(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Breaker.MaxAttemptsPerItem = 3
	// Attempt 1 fails and is retried (attempt 2): both count.
	f.prEvent("evt-1", "12")
	task := f.runOnce("evt-1", "failed", doc.ReasonEngineError, "boom")
	if st, _ := f.k.tasks.Find(task); st != layout.Pending {
		t.Fatalf("the failed attempt was not retried: %s", st)
	}
	f.claim(task)
	f.finalResult(task, map[string]any{"status": "success", "retry_count": 1})
	f.tick()
	f.clk.Advance(time.Hour)
	f.prEvent("evt-2", "12") // attempt 3
	f.tick()
	if _, err := f.k.events.Read(layout.Dispatched, "evt-2"); err != nil {
		t.Fatalf("the third attempt was held: %v", err)
	}
	// The same PR once more: parked, with one alert that names the count
	// and the way out; another PR is not held.
	f.prEvent("evt-3", "12")
	f.prEvent("evt-4", "99")
	f.tick()
	f.prEvent("evt-5", "12")
	f.tick()
	b, _ := f.k.events.Read(layout.Completed, "evt-3")
	if !strings.Contains(string(b), `"discarded": "parked: item gh:acme:web:12: 3 attempts within 24 h reached breaker.max_attempts_per_item 3`) {
		t.Errorf("parked event: %s", b)
	}
	if _, err := f.k.events.Read(layout.Completed, "evt-5"); err != nil {
		t.Errorf("evt-5 of the parked item not completed: %v", err)
	}
	if _, err := f.k.events.Read(layout.Dispatched, "evt-4"); err != nil {
		t.Errorf("another PR was held: %v", err)
	}
	ms := f.parkMessages()
	if len(ms) != 1 {
		t.Fatalf("park alerts = %v, want exactly one", ms)
	}
	m := f.message(ms[0])
	if !strings.HasPrefix(m.Content, "❌ item gh:acme:web:12 parked: 3 attempts") || !strings.Contains(m.Content, "`start unpark item gh:acme:web:12`") {
		t.Errorf("alert %q", m.Content)
	}
	eq(t, "alert's park (the Unpark button's target)", m.Context["park"], any("item:gh:acme:web:12"))
	ps := f.parks()
	if len(ps) != 1 || ps[0].Kind != parks.Item || ps[0].Name != "gh:acme:web:12" || ps[0].Evidence.Count != 3 || !ps[0].Alerted {
		t.Fatalf("parks = %+v", ps)
	}
	// The window's end (the oldest counted attempt + 24 h) lifts it.
	if want := t0.Add(24 * time.Hour); !ps[0].Until.Equal(want) {
		t.Errorf("until = %v, want %v", ps[0].Until, want)
	}
	f.clk.Advance(23*time.Hour + time.Minute)
	f.prEvent("evt-6", "12")
	f.tick()
	if _, err := f.k.events.Read(layout.Dispatched, "evt-6"); err != nil {
		t.Errorf("the window ended, evt-6 not dispatched: %v", err)
	}
	if len(f.parks()) != 0 || len(f.internal("breaker.unparked")) != 1 {
		t.Errorf("parks after the window = %+v", f.parks())
	}
	eq(t, "alerts", len(f.parkMessages()), 1)
}

// Retries are attempts of their item.
func TestBreaker_RetriesCountAsItemAttempts(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Breaker.MaxAttemptsPerItem = 2
	f.prEvent("evt-1", "12")
	task := f.runOnce("evt-1", "failed", doc.ReasonEngineError, "boom") // attempt 1, then its retry: 2
	if st, _ := f.k.tasks.Find(task); st != layout.Pending {
		t.Fatalf("not retried: %s", st)
	}
	f.prEvent("evt-2", "12")
	f.tick()
	if _, err := f.k.events.Read(layout.Completed, "evt-2"); err != nil {
		t.Fatalf("a re-trigger past 2 attempts (one a retry) was not parked: %v", err)
	}
}

// parkFixture parks gen-pr: three EngineError failures with different
// words, no retries.
func parkFixture(t *testing.T) *fixture {
	f := newFixture(t, genPR)
	f.cfg.Breaker.FailureThreshold = 3
	f.cfg.Retry.MaxAttempts = 0
	for i := 1; i <= 3; i++ {
		f.event(fmt.Sprintf("evt-%d", i), "github.pr.review_requested", "normal")
		f.runOnce(fmt.Sprintf("evt-%d", i), "failed", doc.ReasonEngineError, fmt.Sprintf("exit %d in /tmp/ws-%d at 10:0%d", i, i, i))
		f.clk.Advance(5 * time.Minute)
	}
	return f
}

// A general whose failures look alike is parked after the threshold (one
// alert), its events wait with the reason, after park_minutes exactly one
// canary runs, and its success lifts the park.
func TestBreaker_AlikeFailuresParkTheGeneralAndACanaryLiftsIt(t *testing.T) {
	f := parkFixture(t)
	ps := f.parks()
	if len(ps) != 1 || ps[0].Kind != parks.General || ps[0].Name != "gen-pr" {
		t.Fatalf("parks = %+v", ps)
	}
	p := ps[0]
	eq(t, "count", p.Evidence.Count, 3)
	eq(t, "fingerprint", p.Evidence.Fingerprint, "gen-pr|failed|EngineError")
	if len(p.Evidence.Last) != 3 || p.Evidence.Last[2].ErrorReason != doc.ReasonEngineError || !strings.Contains(p.Evidence.Last[2].Error, "exit 3") {
		t.Errorf("evidence = %+v", p.Evidence.Last)
	}
	since := t0.Add(10 * time.Minute)
	if !p.Since.Equal(since) || !p.Until.Equal(since.Add(time.Hour)) {
		t.Errorf("since %v until %v", p.Since, p.Until)
	}
	ms := f.parkMessages()
	if len(ms) != 1 || !strings.Contains(f.message(ms[0]).Content, "❌ gen-pr parked: 3 failures alike (failed, EngineError)") ||
		!strings.Contains(f.message(ms[0]).Content, "`start unpark gen-pr`") {
		t.Fatalf("alerts %v", ms)
	}

	f.event("evt-4", "github.pr.review_requested", "normal")
	f.event("evt-5", "github.pr.review_requested", "normal")
	f.tick()
	eqList(t, "pending while parked", f.ids(layout.QEvents, layout.Pending), "evt-4", "evt-5")
	r, _ := waits.Read(t.Context(), f.k.kv)
	if w := r.ByID()["evt-4"]; w.Reason != parks.WaitReason || !strings.Contains(w.Detail, "gen-pr parked") {
		t.Errorf("wait = %+v", w)
	}
	// Still parked across a restart.
	f.newKing()
	f.clk.Advance(40 * time.Minute) // 10:55; until 11:10
	f.tick()
	eqList(t, "pending before park_minutes", f.ids(layout.QEvents, layout.Pending), "evt-4", "evt-5")

	f.clk.Advance(16 * time.Minute)
	f.tick()
	eqList(t, "one canary, the other waits", f.ids(layout.QEvents, layout.Pending), "evt-5")
	canary, _ := f.eventFile(layout.Dispatched, "evt-4")
	if p := f.parks(); len(p) != 1 || p[0].Canary != canary.TaskID {
		t.Fatalf("canary not recorded: %+v", p)
	}
	f.tick()
	eqList(t, "still one canary", f.ids(layout.QEvents, layout.Pending), "evt-5")
	f.claim(canary.TaskID)
	f.finalResult(canary.TaskID, map[string]any{"status": "success"})
	f.tick()
	if len(f.parks()) != 0 {
		t.Fatalf("a passing canary left the park: %+v", f.parks())
	}
	f.tick()
	eqList(t, "pending after the lift", f.ids(layout.QEvents, layout.Pending))
	eq(t, "alerts", len(f.parkMessages()), 1)
}

// A failing canary is not retried and parks the general again for
// park_minutes, with no second alert.
func TestBreaker_FailingCanaryReparks(t *testing.T) {
	f := parkFixture(t)
	f.cfg.Retry.MaxAttempts = 2
	f.clk.Advance(time.Hour)
	f.event("evt-4", "github.pr.review_requested", "normal")
	f.event("evt-5", "github.pr.review_requested", "normal")
	canary := f.runOnce("evt-4", "failed", doc.ReasonEngineError, "same again")
	eq(t, "canary status", f.task(layout.Completed, canary).Status, doc.ResultFailed)
	ps := f.parks()
	if len(ps) != 1 || ps[0].Canary != "" || ps[0].CanariesFailed != 1 || !ps[0].Until.Equal(f.clk.Now().Add(time.Hour)) {
		t.Fatalf("parks after a failed canary = %+v", ps)
	}
	eqList(t, "still held", f.ids(layout.QEvents, layout.Pending), "evt-5")
	eq(t, "alerts", len(f.parkMessages()), 1)
	eq(t, "reparked", len(f.internal("breaker.reparked")), 1)
}

// The fingerprint is (general, status, reason class): different words
// count together, different reasons do not, a cancel never counts, and
// only the last hour counts.
func TestBreaker_FingerprintAndWindow(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Breaker.FailureThreshold = 3
	f.cfg.Retry.MaxAttempts = 0
	n := 0
	fail := func(reason string) {
		n++
		id := fmt.Sprintf("evt-%d", n)
		f.event(id, "github.pr.review_requested", "normal")
		f.runOnce(id, "failed", reason, fmt.Sprintf("words %d", n))
	}
	fail(doc.ReasonEngineError)
	fail(doc.ReasonTimeout)
	fail(doc.ReasonCancelled)
	fail(doc.ReasonEngineError)
	if len(f.parks()) != 0 {
		t.Fatalf("parked on unlike failures: %+v", f.parks())
	}
	f.clk.Advance(61 * time.Minute)
	fail(doc.ReasonEngineError) // the first two EngineErrors are past the hour
	fail(doc.ReasonEngineError)
	if len(f.parks()) != 0 {
		t.Fatalf("an hour-old failure counted: %+v", f.parks())
	}
	fail(doc.ReasonEngineError)
	if len(f.parks()) != 1 {
		t.Fatalf("three alike within the hour did not park")
	}
	if fp, _ := fingerprint("gen-pr", "failed", "Some free text"); fp != "gen-pr|failed|other" {
		t.Errorf("fingerprint of an unknown reason = %q", fp)
	}
	for _, r := range []string{doc.ReasonCancelled, doc.ReasonHostLost, doc.ReasonUsageLimited} {
		if _, ok := fingerprint("gen-pr", "failed", r); ok {
			t.Errorf("a %s failure counts against the general", r)
		}
	}
}

// `start unpark` lifts a park (and the counts behind it) at once.
func TestBreaker_UnparkByTheOperator(t *testing.T) {
	f := parkFixture(t)
	f.event("evt-4", "github.pr.review_requested", "normal")
	rep := f.unparkRequest("gen-pr")
	if !rep.OK || !strings.Contains(rep.Message, "unparked general gen-pr") {
		t.Fatalf("reply %+v", rep)
	}
	if len(f.parks()) != 0 {
		t.Fatalf("parks = %+v", f.parks())
	}
	eqList(t, "pending after unpark", f.ids(layout.QEvents, layout.Pending))
	// One more failure does not park it again: the counts went with it.
	f.runOnce("evt-4", "failed", doc.ReasonEngineError, "again")
	if len(f.parks()) != 0 {
		t.Errorf("re-parked on the first failure after an unpark")
	}
	if rep := f.unparkRequest("gen-pr"); rep.OK || !strings.Contains(rep.Message, "gen-pr is not parked") {
		t.Errorf("second unpark %+v", rep)
	}

	f.cfg.Breaker.MaxAttemptsPerItem = 1
	f.prEvent("evt-10", "12")
	f.prEvent("evt-11", "12")
	f.tick()
	if len(f.parks()) != 1 {
		t.Fatalf("item not parked")
	}
	if rep := f.unparkRequest("acme/web#12"); !rep.OK {
		t.Fatalf("unpark item %+v", rep)
	}
	f.prEvent("evt-12", "12")
	f.tick()
	if _, err := f.k.events.Read(layout.Dispatched, "evt-12"); err != nil {
		t.Errorf("after unpark the item's event was not dispatched: %v", err)
	}
}

// A park whose alert a crash left unqueued is alerted on the next tick,
// once.
func TestBreaker_AlertAfterACrashIsQueuedOnce(t *testing.T) {
	f := newFixture(t, genPR)
	p := parks.Park{Kind: parks.General, Name: "gen-pr", Since: t0, Until: t0.Add(time.Hour), Reason: "5 failures alike"}
	if err := kv.PutJSON(t.Context(), kv.OnStore(f.st), kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
		t.Fatal(err)
	}
	f.tick()
	f.tick()
	eq(t, "alerts", len(f.parkMessages()), 1)
	if ps := f.parks(); len(ps) != 1 || !ps[0].Alerted {
		t.Errorf("parks = %+v", ps)
	}
	if _, err := os.Stat(f.l.QueueState(layout.QMessages, layout.Pending)); err != nil {
		t.Fatal(err)
	}
}

// A park survives a failover: the next king (another host on the same
// database) holds the item as the first did, and alerts no more.
func TestPG_ParkSurvivesAFailover(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	b := newPGHost(t, dsn, "host-b", clk, genPR)
	a.cfg.Breaker.MaxAttemptsPerItem, b.cfg.Breaker.MaxAttemptsPerItem = 1, 1
	pr := func(h *pgHost, id string) {
		h.t.Helper()
		ev := doc.Event{ID: id, Type: "github.pr.review_requested", Source: doc.SourceGitHub, Priority: "normal",
			Repo: doc.StringPtr("acme/web"), Payload: map[string]any{"pr_number": "12"},
			CreatedAt: doc.FormatTime(clk.Now()), Status: doc.EventPending}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.st.Admit(t.Context(), id, raw); err != nil {
			t.Fatal(err)
		}
	}
	leaseA := a.lead()
	pr(a, "evt-1")
	pr(a, "evt-2")
	a.tick()
	if err := leaseA.Release(); err != nil {
		t.Fatal(err)
	}
	b.lead()
	pr(b, "evt-3")
	b.tick()
	completed := map[string]bool{}
	for _, d := range b.docs(layout.QEvents, layout.Completed) {
		completed[d.ID] = true
	}
	if !completed["evt-2"] || !completed["evt-3"] || completed["evt-1"] {
		t.Fatalf("completed events = %v, want evt-2 and evt-3 parked", completed)
	}
	ps, err := parks.List(t.Context(), kv.OnStore(b.st))
	if err != nil || len(ps) != 1 || ps[0].Name != "gh:acme:web:12" {
		t.Fatalf("parks = %+v, %v", ps, err)
	}
	n := 0
	for _, st := range layout.QueueStates[layout.QMessages] {
		for _, d := range b.docs(layout.QMessages, st) {
			if strings.HasPrefix(d.ID, "msg-park-") {
				n++
			}
		}
	}
	eq(t, "park alerts", n, 1)
}

// A petition that names a parked general waits in petitioning/ (no new
// classification), and becomes its canary when the park is due.
func TestBreaker_PetitionToAParkedGeneralWaits(t *testing.T) {
	f := petitionFixture(t, "general:gen-pr", genPR, genHerald)
	p := parks.Park{Kind: parks.General, Name: "gen-pr", Since: t0, Until: t0.Add(time.Hour), Reason: "5 failures alike", Alerted: true}
	if err := kv.PutJSON(t.Context(), kv.OnStore(f.st), kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
		t.Fatal(err)
	}
	f.dm()
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.tick()
		if _, err := os.Stat(f.l.PetitionResult(dmID)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the classifier never answered")
		}
		select {
		case <-f.k.Wake():
		case <-time.After(50 * time.Millisecond):
		}
	}
	f.tick()
	f.tick()
	eqList(t, "petitioning while parked", f.ids(layout.QEvents, layout.Petitioning), dmID)
	r, _ := waits.Read(t.Context(), f.k.kv)
	if w := r.ByID()[dmID]; w.Reason != parks.WaitReason {
		t.Errorf("wait = %+v", w)
	}
	f.clk.Advance(61 * time.Minute)
	f.tick()
	ev, _ := f.eventFile(layout.Dispatched, dmID)
	if ps := f.parks(); len(ps) != 1 || ps[0].Canary != ev.TaskID {
		t.Errorf("the petition's task is not the canary: %+v", ps)
	}
}

// A cancelled canary proves nothing: the next event is the canary, at once.
func TestBreaker_CancelledCanaryIsReplaced(t *testing.T) {
	f := parkFixture(t)
	f.clk.Advance(time.Hour)
	f.event("evt-4", "github.pr.review_requested", "normal")
	f.event("evt-5", "github.pr.review_requested", "normal")
	first := f.runOnce("evt-4", "failed", doc.ReasonCancelled, "cancelled by alice")
	ps := f.parks()
	if len(ps) != 1 || ps[0].CanariesFailed != 0 {
		t.Fatalf("parks after a cancelled canary = %+v", ps)
	}
	f.tick()
	ev, _ := f.eventFile(layout.Dispatched, "evt-5")
	if ps := f.parks(); len(ps) != 1 || ps[0].Canary != ev.TaskID || ev.TaskID == first {
		t.Errorf("evt-5 is not the new canary: %+v", ps)
	}
}

// A general killed between claiming an attempt and spawning its soldier
// leaves a SoldierDied with no soldier: Kingdom's crash, nothing spent,
// never counted. A soldier that died on its own counts as any failure.
func TestBreaker_AttemptOrphanedBeforeItsSoldierIsNotCounted(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Breaker.FailureThreshold = 3
	f.cfg.Retry.MaxAttempts = 0
	n := 0
	die := func(soldier string) {
		n++
		id := fmt.Sprintf("evt-%d", n)
		f.event(id, "github.pr.review_requested", "normal")
		f.tick()
		ev, _ := f.eventFile(layout.Dispatched, id)
		f.claim(ev.TaskID)
		r := map[string]any{"status": doc.ResultKilled, "error_reason": doc.ReasonSoldierDied,
			"error": "general restarted and found no live soldier for the task"}
		if soldier != "" {
			r["soldier_id"] = soldier
		}
		f.finalResult(ev.TaskID, r)
		f.tick()
	}
	for range 4 {
		die("")
	}
	if len(f.parks()) != 0 {
		t.Fatalf("attempts orphaned before their soldier parked the general: %+v", f.parks())
	}
	for i := range 3 {
		die(fmt.Sprintf("soldier-1700000000-%08d", i))
	}
	if ps := f.parks(); len(ps) != 1 || ps[0].Evidence.Fingerprint != "gen-pr|killed|SoldierDied" {
		t.Fatalf("three soldiers dead on their own did not park the general: %+v", ps)
	}
}
