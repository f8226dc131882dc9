package sentinel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/watchstatus"
)

// A watcher failing on every poll (a revoked token: HTTP 401) is recorded
// in state/sentinel/watchers.json with its consecutive failures and its
// clipped, secret-free error, for the chamberlain to alert on; a success
// resets the count; a watcher no longer enabled leaves the record.
func TestSentinel_RecordsWatcherFailuresForTheChamberlain(t *testing.T) {
	e := newEnv(t)
	e.getenv["GH_TOKEN"] = "ghp_revoked0000000000000000000000"
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	if err := watchstatus.Save(watchstatus.Path(e.l), watchstatus.File{Watchers: map[string]watchstatus.Watcher{
		"jira": {ConsecutiveFailures: 7, LastError: "old"}}}); err != nil {
		t.Fatal(err)
	}
	s := e.sentinel(e.config(gh.yaml("")))
	for i := 0; i < 3; i++ {
		e.tick(s)
		e.clk.Advance(61 * time.Second)
	}
	if gh.getCount() != 3 {
		t.Fatalf("%d GETs, want 3", gh.getCount())
	}
	st, err := watchstatus.Load(watchstatus.Path(e.l))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := st.Watchers["github"]
	if !ok || w.ConsecutiveFailures != 3 || !w.Failing() {
		t.Fatalf("github record = %+v (present %v), want 3 failures", w, ok)
	}
	if !strings.Contains(w.LastError, "401") || strings.Contains(w.LastError, "ghp_revoked") || len(w.LastError) > 600 {
		t.Errorf("last_error = %q, want the 401, clipped, without the token", w.LastError)
	}
	if _, ok := st.Watchers["jira"]; ok {
		t.Error("a watcher that is not enabled stays in the record")
	}

	e.getenv["GH_TOKEN"] = "ghp_testtoken000000000000000000"
	s = e.sentinel(e.config(gh.yaml("")))
	e.tick(s)
	st, _ = watchstatus.Load(watchstatus.Path(e.l))
	if w := st.Watchers["github"]; w.ConsecutiveFailures != 0 || w.LastSuccessAt == "" {
		t.Errorf("after a success: %+v, want the count reset", w)
	}
}
