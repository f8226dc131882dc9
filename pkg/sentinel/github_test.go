package sentinel_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/github"
)

const fixtureIDs = "evt-github-1001-20261121095800,evt-github-1002-20261121095930,evt-github-1003-20261121095000,evt-github-1004-20261121094000"

func sorted(s []string) string { s = slices.Clone(s); slices.Sort(s); return strings.Join(s, ",") }

func ghState(t *testing.T, e *env) github.State {
	t.Helper()
	var st github.State
	b, err := os.ReadFile(e.l.SentinelGitHubState())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(e.l.SentinelGitHubState())
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("github-state.json mode %v, want 0600", fi.Mode().Perm())
	}
	return st
}

func TestGitHub_ETagRoundTrip(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	s := e.sentinel(e.config(gh.yaml("")))

	e.tick(s)
	if got := sorted(e.pending()); got != fixtureIDs {
		t.Fatalf("pending = %s, want %s", got, fixtureIDs)
	}
	first := gh.lastGet()
	if first.Header.Get("If-None-Match") != "" {
		t.Errorf("first poll sent If-None-Match %q", first.Header.Get("If-None-Match"))
	}
	if first.Header.Get("Accept") != "application/vnd.github+json" {
		t.Errorf("Accept = %q", first.Header.Get("Accept"))
	}
	etag := ghState(t, e).ETag
	if etag == "" {
		t.Fatal("no ETag saved")
	}
	marksAfterFirst := len(gh.marked())

	e.clk.Advance(60 * time.Second)
	e.tick(s)
	if gh.getCount() != 2 {
		t.Fatalf("second poll not made: %d GETs", gh.getCount())
	}
	if got := gh.lastGet().Header.Get("If-None-Match"); got != etag {
		t.Errorf("second poll If-None-Match = %q, want %q", got, etag)
	}
	if got := sorted(e.pending()); got != fixtureIDs {
		t.Errorf("after 304 pending = %s", got)
	}
	if len(gh.marked()) != marksAfterFirst {
		t.Errorf("304 led to mark-read calls: %v", gh.marked())
	}
	if n := len(e.detected()); n != 4 {
		t.Errorf("event.detected lines = %d, want 4", n)
	}
	// A restarted sentinel keeps the ETag.
	e.clk.Advance(60 * time.Second)
	e.tick(e.sentinel(e.config(gh.yaml(""))))
	if got := gh.lastGet().Header.Get("If-None-Match"); got != etag {
		t.Errorf("after restart If-None-Match = %q, want %q", got, etag)
	}
}

func TestGitHub_PollIntervalAndInterval(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	gh.pollSecs = 120
	s := e.sentinel(e.config(gh.yaml("")))
	e.tick(s)
	e.clk.Advance(61 * time.Second)
	e.tick(s)
	if gh.getCount() != 1 {
		t.Errorf("polled again after 61 s although X-Poll-Interval is 120: %d GETs", gh.getCount())
	}
	e.clk.Advance(60 * time.Second)
	e.tick(s)
	if gh.getCount() != 2 {
		t.Errorf("not polled after 121 s: %d GETs", gh.getCount())
	}
	if ghState(t, e).PollIntervalSeconds != 120 {
		t.Errorf("poll interval not saved: %+v", ghState(t, e))
	}
}

func TestGitHub_LinkPagination(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"), readFixture(t, "github/testdata/notifications_page2.json"))
	s := e.sentinel(e.config(gh.yaml("")))
	e.tick(s)
	want := fixtureIDs + ",evt-github-2001-20261121080000"
	if got := sorted(e.pending()); got != want {
		t.Fatalf("pending = %s, want %s", got, want)
	}
	if gh.getCount() != 2 || gh.lastGet().URL.Query().Get("page") != "2" {
		t.Errorf("page 2 not followed: %d GETs, last %v", gh.getCount(), gh.lastGet().URL)
	}
	if ev := e.event("evt-github-2001-20261121080000"); ev.Type != "github.pr.comment" || ev.Payload["pr_number"] != "1350" {
		t.Errorf("page 2 event = %+v", ev)
	}
}

func TestGitHub_ScopeFiltersLeaveOthersUnread(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	s := e.sentinel(e.config(gh.yaml("    scope:\n      repos: [octocat/Hello-World]\n      filter_reasons: [review_requested, assign]\n")))
	e.tick(s)
	if got, want := sorted(e.pending()), "evt-github-1001-20261121095800,evt-github-1002-20261121095930"; got != want {
		t.Errorf("pending = %s, want %s", got, want)
	}
	if got := sorted(gh.marked()); got != "1001,1002" {
		t.Errorf("marked = %s, want 1001,1002", got)
	}
}

func TestGitHub_MarkReadExactlyEmittedAfterQueueing(t *testing.T) {
	e := newEnv(t)
	// 1002 was queued in an earlier life (its seen marker exists): it is
	// marked read again; 3001 is new; the crafted id is neither.
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications_bad_id.json"))
	var notQueued []string
	gh.onMark = func(thread string) int {
		// At PATCH time the event must already be in the queue.
		ids := e.pending()
		found := false
		for _, id := range ids {
			if strings.HasPrefix(id, "evt-github-"+thread+"-") {
				found = true
			}
		}
		if !found {
			notQueued = append(notQueued, thread)
		}
		return 0
	}
	s := e.sentinel(e.config(gh.yaml("")))
	e.tick(s)
	if got := sorted(gh.marked()); got != "3001" {
		t.Errorf("marked = %q, want exactly 3001", got)
	}
	if len(notQueued) > 0 {
		t.Errorf("threads marked read before their event was queued: %v", notQueued)
	}
	if got := sorted(e.pending()); got != "evt-github-3001-20261121090100" {
		t.Errorf("pending = %s", got)
	}
	if e.logs.count("unsafe notification id") != 1 {
		t.Errorf("no clear log line for the unsafe id:\n%s", e.logs)
	}
	entries, _ := os.ReadDir(e.l.SeenDir())
	for _, de := range entries {
		b, _ := os.ReadFile(filepath.Join(e.l.SeenDir(), de.Name()))
		if strings.Contains(de.Name()+string(b), "etc") || strings.Contains(de.Name()+string(b), "passwd") {
			t.Errorf("unsafe id reached the seen dir: %s", de.Name())
		}
	}
}

func TestGitHub_CrashBetweenQueueAndMarkReadDoesNotDuplicate(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	gh.hideRead = true
	var failing atomic.Bool
	failing.Store(true)
	gh.onMark = func(string) int {
		if failing.Load() {
			return http.StatusInternalServerError // the simulated crash: nothing gets marked
		}
		return 0
	}
	s := e.sentinel(e.config(gh.yaml("")))
	e.tick(s)
	if len(e.pending()) != 4 || len(gh.marked()) != 0 {
		t.Fatalf("first round: pending %d marked %v", len(e.pending()), gh.marked())
	}
	if st := ghState(t, e); st.ETag != "" {
		t.Errorf("ETag advanced although mark-read failed: %+v", st)
	}
	// The king consumes two events meanwhile: they are no longer pending
	// nor dispatched, only their seen markers remain.
	for _, id := range []string{"evt-github-1001-20261121095800", "evt-github-1002-20261121095930"} {
		if err := e.q.Move(layout.Pending, layout.Completed, id); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(e.q.Dir(layout.Completed))

	failing.Store(false)
	e.clk.Advance(60 * time.Second)
	s2 := e.sentinel(e.config(gh.yaml(""))) // a restarted process
	e.tick(s2)
	if n := len(e.detected()); n != 4 {
		t.Errorf("event.detected = %d after the repeat, want 4 (no duplicates)", n)
	}
	if got := len(e.pending()); got != 2 {
		t.Errorf("pending = %d, want the 2 untouched ones", got)
	}
	if got := sorted(gh.marked()); got != "1001,1002,1003,1004" {
		t.Errorf("marked after recovery = %s", got)
	}
	if ghState(t, e).ETag == "" {
		t.Error("ETag not advanced after a clean round")
	}
}

func TestGitHub_RateLimitWaitsForReset(t *testing.T) {
	for _, mode := range []string{"403-reset", "429-retry-after"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
			var limited atomic.Bool
			limited.Store(true)
			gh.override = func(w http.ResponseWriter, r *http.Request) bool {
				if !limited.Load() {
					return false
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				if mode == "403-reset" {
					w.Header().Set("X-RateLimit-Limit", "5000")
					w.Header().Set("X-RateLimit-Remaining", "0")
					w.Header().Set("X-RateLimit-Used", "5000")
					w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(e.clk.Now().Add(90*time.Second).Unix(), 10))
					w.WriteHeader(http.StatusForbidden)
				} else {
					w.Header().Set("Retry-After", "90")
					w.WriteHeader(http.StatusTooManyRequests)
				}
				w.Write(readFixture(t, "github/testdata/rate_limited.json"))
				return true
			}
			s := e.sentinel(e.config(gh.yaml("")))
			e.tick(s)
			if gh.getCount() != 1 || len(e.pending()) != 0 {
				t.Fatalf("first poll: %d GETs, %d pending", gh.getCount(), len(e.pending()))
			}
			limited.Store(false) // GitHub would answer now, but the reset has not come
			for _, step := range []time.Duration{10, 50, 29} {
				e.clk.Advance(step * time.Second)
				e.tick(s)
			}
			// A restart inside the window must not call either.
			e.tick(e.sentinel(e.config(gh.yaml(""))))
			if gh.getCount() != 1 {
				t.Fatalf("requests before the reset: %d GETs at +89 s", gh.getCount())
			}
			if n := e.logs.count("[WARN] [sentinel] github rate limited"); n != 1 {
				t.Errorf("rate limit logged %d times, want once:\n%s", n, e.logs)
			}
			e.clk.Advance(2 * time.Second) // +91 s: past the reset
			s3 := e.sentinel(e.config(gh.yaml("")))
			e.tick(s3)
			if gh.getCount() != 2 {
				t.Fatalf("no request after the reset: %d GETs", gh.getCount())
			}
			if len(e.pending()) != 4 {
				t.Errorf("pending after the reset = %d, want 4", len(e.pending()))
			}
		})
	}
}

func TestGitHub_BadInputIsLoggedAndNextPollWorks(t *testing.T) {
	html := readFixture(t, "github/testdata/error_page.html")
	malformed := readFixture(t, "github/testdata/malformed.json")
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
		log   string
	}{
		{"malformed JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(malformed)
		}, "not JSON"},
		{"HTML page with 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write(html)
		}, "got HTML"},
		{"HTML 502", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			w.Write(html)
		}, "HTTP 502: an HTML page"},
		{"500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"Server Error"}`))
		}, `HTTP 500: \"Server Error\"`},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers; the client's 1 s timeout (set below) fires
		}, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
			var bad atomic.Bool
			bad.Store(true)
			gh.override = func(w http.ResponseWriter, r *http.Request) bool {
				if !bad.Load() {
					return false
				}
				c.serve(w, r)
				return true
			}
			yaml := gh.yaml("")
			if c.name == "timeout" { // the behaviour under test; other requests get the fake's 60 s
				yaml = strings.Replace(yaml, "timeout_seconds: 60", "timeout_seconds: 1", 1)
			}
			s := e.sentinel(e.config(yaml))
			e.tick(s) // a fetch error never fails the tick
			if len(e.pending()) != 0 || len(gh.marked()) != 0 {
				t.Fatalf("bad answer queued %v / marked %v", e.pending(), gh.marked())
			}
			if !strings.Contains(e.logs.String(), "fetch failed") || !strings.Contains(e.logs.String(), c.log) {
				t.Errorf("log lacks %q:\n%s", c.log, e.logs)
			}
			if _, err := os.Stat(e.l.SentinelGitHubState()); err == nil && ghState(t, e).ETag != "" {
				t.Errorf("ETag advanced on bad input")
			}
			if strings.Contains(e.logs.String(), "ghp_testtoken") {
				t.Errorf("token leaked into logs")
			}
			bad.Store(false)
			e.clk.Advance(60 * time.Second)
			e.tick(s)
			if got := sorted(e.pending()); got != fixtureIDs {
				t.Errorf("next poll pending = %s", got)
			}
		})
	}
}

func TestGitHub_TokenFromGITHUB_TOKEN(t *testing.T) {
	e := newEnv(t)
	e.getenv = map[string]string{"GITHUB_TOKEN": "ghp_testtoken000000000000000000"}
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	e.tick(e.sentinel(e.config(gh.yaml(""))))
	if len(e.pending()) != 4 {
		t.Errorf("GITHUB_TOKEN not used: pending %v\n%s", e.pending(), e.logs)
	}
	// Without any token the fake answers 401 and the log says so.
	e2 := newEnv(t)
	e2.getenv = map[string]string{}
	e2.tick(e2.sentinel(e2.config(gh.yaml(""))))
	if !strings.Contains(e2.logs.String(), "GH_TOKEN") || !strings.Contains(e2.logs.String(), "HTTP 401") {
		t.Errorf("missing token not explained:\n%s", e2.logs)
	}
}
