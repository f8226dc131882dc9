package sentinel_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/sentinel/jira"
)

// fakeJira speaks POST /rest/api/3/search/jql like Jira Cloud: Basic auth,
// a JSON body {jql, maxResults, fields, nextPageToken}, pages chained by
// nextPageToken (absent on the last page).
type fakeJira struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// pages by the token that asks for them ("" = first page).
	pages    map[string][]byte
	bodies   []map[string]any
	override func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeJira(t *testing.T) *fakeJira {
	f := &fakeJira{t: t, pages: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeJira) yaml() string {
	return fmt.Sprintf("polling:\n  jira:\n    interval_seconds: 300\n    timeout_seconds: 60\n    url: %s\n    scope:\n      jql_base: assignee = currentUser()\n", f.srv.URL)
}

func (f *fakeJira) set(token string, body []byte) {
	f.mu.Lock()
	f.pages[token] = body
	f.mu.Unlock()
}

func (f *fakeJira) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func (f *fakeJira) lastJQL() string {
	r := f.requests()
	if len(r) == 0 {
		return ""
	}
	return fmt.Sprint(r[len(r)-1]["jql"])
}

func (f *fakeJira) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/rest/api/3/search/jql" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != "bot@example.com" || p != "jira-secret-token" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(readFixture(f.t, "jira/testdata/unauthorized.json"))
		return
	}
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &body) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	ov := f.override
	f.mu.Unlock()
	if ov != nil && ov(w, r) {
		return
	}
	token, _ := body["nextPageToken"].(string)
	f.mu.Lock()
	page, ok := f.pages[token]
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"errorMessages":["Invalid nextPageToken"],"errors":{}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Write(page)
}

func jiraState(t *testing.T, e *env) jira.State {
	t.Helper()
	var st jira.State
	b, err := os.ReadFile(e.l.SentinelJiraState())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func issueJSON(key, summary, status, updated string) []byte {
	return []byte(fmt.Sprintf(`{"issues":[{"id":"1","key":%q,"fields":{"summary":%q,"status":{"name":%q},"updated":%q}}],"isLast":true}`, key, summary, status, updated))
}

func TestJira_FirstRunWindowAndLastCheck(t *testing.T) {
	e := newEnv(t)
	fj := newFakeJira(t)
	fj.set("", readFixture(t, "jira/testdata/search_single.json"))
	s := e.sentinel(e.config(fj.yaml()))
	e.tick(s)
	want := `(assignee = currentUser()) AND updated >= "-10m" ORDER BY updated DESC`
	if got := fj.lastJQL(); got != want {
		t.Errorf("first JQL = %s\nwant        %s", got, want)
	}
	if st := jiraState(t, e); st.LastCheck != "2026/11/21 10:00" {
		t.Errorf("last_check = %q, want 2026/11/21 10:00", st.LastCheck)
	}
	e.clk.Advance(5 * time.Minute)
	e.tick(s)
	if got := fj.lastJQL(); !strings.Contains(got, `updated >= "-6m"`) {
		t.Errorf("second JQL = %s, want a -6m window", got)
	}
	if st := jiraState(t, e); st.LastCheck != "2026/11/21 10:05" {
		t.Errorf("last_check = %q, want 2026/11/21 10:05", st.LastCheck)
	}
}

func TestJira_AssignedThenUpdated(t *testing.T) {
	e := newEnv(t)
	fj := newFakeJira(t)
	fj.set("", readFixture(t, "jira/testdata/search_single.json"))
	s := e.sentinel(e.config(fj.yaml()))
	e.tick(s)
	id1 := "evt-jira-QP-123-20261121005512345"
	ev := e.event(id1)
	if ev.Type != "jira.ticket.assigned" || ev.Source != "jira" || ev.Repo != nil {
		t.Errorf("first sight = %s %s %v", ev.Type, ev.Source, ev.Repo)
	}
	for k, v := range map[string]any{"ticket_key": "QP-123", "summary": "Login page shows a blank screen",
		"status": "To Do", "previous_status": nil, "url": fj.srv.URL + "/browse/QP-123"} {
		if ev.Payload[k] != v {
			t.Errorf("payload[%s] = %v, want %v", k, ev.Payload[k], v)
		}
	}
	if st := jiraState(t, e); st.KnownIssues["QP-123"] != "To Do" {
		t.Errorf("known_issues = %v", st.KnownIssues)
	}

	// The same hit again (window overlap): nothing new.
	e.clk.Advance(5 * time.Minute)
	e.tick(s)
	if len(e.pending()) != 1 {
		t.Errorf("overlap queued again: %v", e.pending())
	}

	fj.set("", issueJSON("QP-123", "Login page shows a blank screen", "In Progress", "2026-11-21T10:03:00.000+0000"))
	e.clk.Advance(5 * time.Minute)
	s = e.sentinel(e.config(fj.yaml())) // after a restart, known_issues comes from disk
	e.tick(s)
	ev2 := e.event("evt-jira-QP-123-20261121100300000")
	if ev2.Type != "jira.ticket.updated" || ev2.Payload["previous_status"] != "To Do" || ev2.Payload["status"] != "In Progress" {
		t.Errorf("update = %s prev %v status %v", ev2.Type, ev2.Payload["previous_status"], ev2.Payload["status"])
	}
	if st := jiraState(t, e); st.KnownIssues["QP-123"] != "In Progress" {
		t.Errorf("known_issues = %v", st.KnownIssues)
	}
	if got := len(e.detected()); got != 2 {
		t.Errorf("event.detected = %d, want 2", got)
	}
	// A ticket quiet for longer than KnownIssueTTL is forgotten: the state
	// file does not grow with every ticket ever seen.
	fj.set("", issueJSON("QP-999", "Another ticket", "To Do", "2026-11-21T10:10:00.000+0000"))
	e.clk.Advance(jira.KnownIssueTTL + time.Hour)
	e.tick(s)
	st := jiraState(t, e)
	if _, ok := st.KnownIssues["QP-123"]; ok {
		t.Errorf("QP-123 still known after %v without updates: %v", jira.KnownIssueTTL, st.KnownIssues)
	}
	if st.KnownIssues["QP-999"] != "To Do" || st.LastSeen["QP-999"] == "" {
		t.Errorf("the fresh ticket is not remembered: %+v", st)
	}
}

func TestJira_PaginationAcrossThreePages(t *testing.T) {
	e := newEnv(t)
	fj := newFakeJira(t)
	fj.set("", readFixture(t, "jira/testdata/search_page1.json"))
	fj.set("CAEaAggD", readFixture(t, "jira/testdata/search_page2.json"))
	fj.set("CAEaAggG", readFixture(t, "jira/testdata/search_page3.json"))
	s := e.sentinel(e.config(fj.yaml()))
	e.tick(s)
	want := "evt-jira-QP-201-20261121095900000,evt-jira-QP-202-20261121095800000,evt-jira-QP-203-20261121095700000,evt-jira-QP-204-20261121095600000"
	if got := sorted(e.pending()); got != want {
		t.Errorf("pending = %s\nwant      %s", got, want)
	}
	reqs := fj.requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	for i, tok := range []any{nil, "CAEaAggD", "CAEaAggG"} {
		if reqs[i]["nextPageToken"] != tok {
			t.Errorf("request %d nextPageToken = %v, want %v", i, reqs[i]["nextPageToken"], tok)
		}
		if reqs[i]["jql"] != reqs[0]["jql"] {
			t.Errorf("request %d changed the JQL", i)
		}
	}
}

func TestJira_FailureLeavesLastCheck(t *testing.T) {
	html := readFixture(t, "github/testdata/error_page.html")
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
		log   string
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"errorMessages":["Internal server error"],"errors":{}}`))
		}, "HTTP 500"},
		{"HTML", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write(html)
		}, "got HTML"},
		{"malformed", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"issues":[{"key":`)) }, "not the expected JSON"},
		{"timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "timeout"},
		// Page 1 of the round is fine, page 2 breaks: nothing of the
		// round is queued and last_check stays.
		{"bad page 2", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }, "HTTP 502"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			fj := newFakeJira(t)
			fj.set("", readFixture(t, "jira/testdata/search_single.json"))
			yaml := fj.yaml()
			if c.name == "timeout" { // the behaviour under test; other requests get the fake's 60 s
				yaml = strings.Replace(yaml, "timeout_seconds: 60", "timeout_seconds: 1", 1)
			}
			s := e.sentinel(e.config(yaml))
			e.tick(s) // a good first run
			before := jiraState(t, e)
			var bad atomic.Bool
			bad.Store(true)
			fj.set("", readFixture(t, "jira/testdata/search_page1.json"))
			fj.set("CAEaAggD", readFixture(t, "jira/testdata/search_page2.json"))
			fj.set("CAEaAggG", readFixture(t, "jira/testdata/search_page3.json"))
			fj.mu.Lock()
			fj.override = func(w http.ResponseWriter, r *http.Request) bool {
				if !bad.Load() {
					return false
				}
				if c.name == "bad page 2" && len(fj.bodies) < 3 { // request 2 is page 1 of this round
					return false
				}
				c.serve(w, r)
				return true
			}
			fj.mu.Unlock()
			e.clk.Advance(5 * time.Minute)
			e.tick(s)
			if after := jiraState(t, e); after.LastCheck != before.LastCheck {
				t.Errorf("last_check moved on failure: %q → %q", before.LastCheck, after.LastCheck)
			}
			if len(e.pending()) != 1 {
				t.Errorf("failure queued events: %v", e.pending())
			}
			if !strings.Contains(e.logs.String(), "fetch failed") || !strings.Contains(e.logs.String(), c.log) {
				t.Errorf("log lacks %q:\n%s", c.log, e.logs)
			}
			if strings.Contains(e.logs.String(), "jira-secret-token") {
				t.Error("token leaked into logs")
			}
			bad.Store(false)
			e.clk.Advance(5 * time.Minute)
			e.tick(s)
			if !strings.Contains(fj.lastJQL(), `"-11m"`) {
				t.Errorf("window after a failure = %s, want -11m (10 min since the last success + 1)", fj.lastJQL())
			}
			if len(e.pending()) != 5 {
				t.Errorf("next poll pending = %v", e.pending())
			}
		})
	}
}

func TestJira_UnsafeKeySkipped(t *testing.T) {
	e := newEnv(t)
	fj := newFakeJira(t)
	fj.set("", readFixture(t, "jira/testdata/bad_key.json"))
	s := e.sentinel(e.config(fj.yaml()))
	e.tick(s)
	if got := sorted(e.pending()); got != "evt-jira-QP-300-20261121090100000" {
		t.Errorf("pending = %s", got)
	}
	if !strings.Contains(e.logs.String(), "unsafe issue key") {
		t.Errorf("no log line for the crafted key:\n%s", e.logs)
	}
	if st := jiraState(t, e); st.LastCheck == "" {
		t.Error("a skipped bad issue must not hold last_check back")
	}
}

func TestJira_WrongCredentialsAreNamed(t *testing.T) {
	e := newEnv(t)
	e.getenv["JIRA_API_TOKEN"] = "wrong-token-value"
	fj := newFakeJira(t)
	fj.set("", readFixture(t, "jira/testdata/search_single.json"))
	e.tick(e.sentinel(e.config(fj.yaml())))
	if !strings.Contains(e.logs.String(), "HTTP 401") || !strings.Contains(e.logs.String(), "JIRA_API_TOKEN") {
		t.Errorf("401 not explained:\n%s", e.logs)
	}
	if strings.Contains(e.logs.String(), "wrong-token-value") {
		t.Error("token leaked")
	}
	if _, err := os.Stat(e.l.SentinelJiraState()); err == nil && jiraState(t, e).LastCheck != "" {
		t.Error("last_check set after a 401")
	}
}
