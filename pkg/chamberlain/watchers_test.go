package chamberlain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/watchstatus"
)

// A watcher failing on every poll (a revoked token answering 401) leaves the
// sentinel ticking and its heartbeat fresh. After watchstatus.FailingAfter
// failures in a row the chamberlain alerts once, emits one internal event,
// and the verdict is degraded naming the watcher; a success recovers it.
func TestWatchers_FailingOnEveryPollAlertsOnceAndDegrades(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	var st watchstatus.File
	poll := func(err error) {
		t.Helper()
		st.Record("github", err, e.clk.Now())
		st.Record("inbox", nil, e.clk.Now())
		if err := watchstatus.Save(watchstatus.Path(e.l), st); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Minute)
		e.tick(r)
	}
	revoked := errors.New("GET /notifications: 401 Bad credentials")
	for i := 1; i < watchstatus.FailingAfter; i++ {
		poll(revoked)
	}
	if n := len(e.messagesOf(KindWatcher)); n != 0 {
		t.Fatalf("alerts after %d failures = %d, want none yet", watchstatus.FailingAfter-1, n)
	}
	if v := r.Last.Verdict(); strings.Contains(v.line(), "watcher") {
		t.Fatalf("verdict names a watcher before it is failing: %s", v.line())
	}
	for i := 0; i < 10; i++ {
		poll(revoked)
	}
	msgs := e.messagesOf(KindWatcher)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "github") || !strings.Contains(msgs[0].Content, "401") {
		t.Fatalf("watcher alerts = %+v, want exactly one naming github and its error", msgs)
	}
	if evs := e.events("system.watcher_failing"); len(evs) != 1 || dataOf(t, evs[0])["watcher"] != "github" {
		t.Fatalf("system.watcher_failing events = %v, want one for github", evs)
	}
	v := r.Last.Verdict()
	var named bool
	for _, p := range v.Problems {
		named = named || p.Check == "watcher:github"
	}
	if v.Exit < VerdictDegraded || !named {
		t.Fatalf("verdict = %+v, want degraded naming watcher:github", v)
	}
	for i := 0; i < 4; i++ { // past RecoverAfter
		poll(nil)
	}
	if n := len(e.events("system.watcher_recovered")); n != 1 {
		t.Fatalf("system.watcher_recovered events = %d, want 1", n)
	}
	if n := len(e.messagesOf(KindRecovered)); n != 1 {
		t.Fatalf("recovered notes = %d, want 1", n)
	}
}
