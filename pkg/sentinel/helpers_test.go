package sentinel_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuf) count(sub string) int { return strings.Count(s.String(), sub) }

type env struct {
	t      testing.TB
	l      layout.Layout
	clk    *clock.Fake
	logs   *syncBuf
	em     *eventlog.Emitter
	st     *files.Store // the store the sentinel admits through
	last   *sentinel.Sentinel
	q      *queue.Queue
	getenv map[string]string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{
		t: t, l: l, clk: clk, logs: &syncBuf{}, st: st,
		em:     eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), layout.RoleSentinel, clk),
		q:      queue.OnStore(st, l, layout.QEvents, nil, "test-host"),
		getenv: map[string]string{"GH_TOKEN": "ghp_testtoken000000000000000000", "JIRA_USER_EMAIL": "bot@example.com", "JIRA_API_TOKEN": "jira-secret-token"},
	}
}

// config writes sentinel.yaml and loads it the way cmd/sentinel does.
func (e *env) config(yaml string) *config.Sentinel {
	e.t.Helper()
	p := e.l.ConfigFile("sentinel.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
	c, err := config.LoadSentinel(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sentinel builds a sentinel (a fresh one is a restarted process: the
// previous one gives its pollers' lease up, as its exit would).
func (e *env) sentinel(cfg *config.Sentinel) *sentinel.Sentinel {
	e.t.Helper()
	if e.last != nil {
		e.last.Close()
	}
	s, err := sentinel.New(cfg, sentinel.Options{
		Layout: e.l, Clock: e.clk, Events: e.em,
		Log:    logging.New(logging.Options{Role: "sentinel", Stdout: e.logs, Level: -4}),
		Getenv: func(k string) string { return e.getenv[k] },
		Store:  e.st, Host: "test-host",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	e.last = s
	return s
}

func (e *env) tick(s *sentinel.Sentinel) {
	e.t.Helper()
	if err := s.Tick(e.t.Context()); err != nil {
		e.t.Fatalf("tick: %v", err)
	}
}

func (e *env) pending() []string {
	ids, _ := e.q.IDs(layout.Pending)
	return ids
}

func (e *env) event(id string) *doc.Event {
	e.t.Helper()
	b, err := e.q.Read(layout.Pending, id)
	if err != nil {
		e.t.Fatalf("read event %s: %v", id, err)
	}
	ev, err := schema.DecodeEvent(b)
	if err != nil {
		e.t.Fatalf("event %s: %v", id, err)
	}
	return ev
}

// detected returns the event ids of event.detected lines in events.log.
func (e *env) detected() []string {
	b, _ := os.ReadFile(e.l.EventsLog())
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Type  string         `json:"type"`
			Actor string         `json:"actor"`
			Data  map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "event.detected" {
			if ev.Actor != "sentinel" || ev.Data["source"] == nil || ev.Data["event_type"] == nil {
				e.t.Errorf("event.detected line incomplete: %s", line)
			}
			out = append(out, fmt.Sprint(ev.Data["event_id"]))
		}
	}
	return out
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeGitHub speaks GET /notifications (ETag, If-None-Match → 304,
// X-Poll-Interval, Link pagination, unread-only lists) and PATCH
// /notifications/threads/{id} (205) like api.github.com.
type fakeGitHub struct {
	t   testing.TB
	srv *httptest.Server
	mu  sync.Mutex
	// pages of notifications (raw JSON arrays as served).
	pages [][]byte
	// hideRead drops threads marked read from later lists, as GitHub does.
	hideRead bool
	read     map[string]bool
	// override answers a request first when it returns true.
	override func(w http.ResponseWriter, r *http.Request) bool
	// onMark runs inside PATCH before answering (status 0 = 205).
	onMark   func(thread string) int
	gets     []*http.Request
	marks    []string
	pollSecs int
}

func newFakeGitHub(t testing.TB, pages ...[]byte) *fakeGitHub {
	f := &fakeGitHub{t: t, pages: pages, read: map[string]bool{}, pollSecs: 60}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) yaml(extra string) string {
	return fmt.Sprintf("polling:\n  github:\n    interval_seconds: 60\n    timeout_seconds: 60\n    api_url: %s\n%s", f.srv.URL, extra)
}

func (f *fakeGitHub) setPages(pages ...[]byte) {
	f.mu.Lock()
	f.pages = pages
	f.mu.Unlock()
}

func (f *fakeGitHub) getCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.gets)
}

func (f *fakeGitHub) marked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.marks...)
}

func (f *fakeGitHub) lastGet() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.gets) == 0 {
		return nil
	}
	return f.gets[len(f.gets)-1]
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if r.Method == http.MethodGet {
		f.gets = append(f.gets, r.Clone(r.Context()))
	}
	ov := f.override
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer ghp_testtoken000000000000000000" {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"message":"Requires authentication"}`))
		return
	}
	if ov != nil && ov(w, r) {
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/notifications":
		f.list(w, r)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/notifications/threads/"):
		id := strings.TrimPrefix(r.URL.Path, "/notifications/threads/")
		code := http.StatusResetContent
		if f.onMark != nil {
			if c := f.onMark(id); c != 0 {
				code = c
			}
		}
		f.mu.Lock()
		if code == http.StatusResetContent {
			f.marks = append(f.marks, id)
			f.read[id] = true
		}
		f.mu.Unlock()
		w.WriteHeader(code)
	default:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"Not Found"}`))
	}
}

func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := 1
	fmt.Sscan(r.URL.Query().Get("page"), &page)
	if page < 1 || page > max(len(f.pages), 1) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		return
	}
	body := []byte("[]")
	if len(f.pages) > 0 {
		body = f.pages[page-1]
	}
	if f.hideRead {
		var items []map[string]any
		json.Unmarshal(body, &items)
		kept := []map[string]any{}
		for _, it := range items {
			if !f.read[fmt.Sprint(it["id"])] {
				kept = append(kept, it)
			}
		}
		body, _ = json.Marshal(kept)
	}
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("X-Poll-Interval", fmt.Sprint(f.pollSecs))
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	if page == 1 && r.Header.Get("If-None-Match") == etag {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if page == 1 {
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", "Sat, 21 Nov 2026 09:59:30 GMT")
	}
	if page < len(f.pages) {
		w.Header().Set("Link", fmt.Sprintf(`<%s/notifications?per_page=50&page=%d>; rel="next", <%s/notifications?per_page=50&page=%d>; rel="last"`,
			f.srv.URL, page+1, f.srv.URL, len(f.pages)))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

func newLogger(e *env) *slog.Logger {
	return logging.New(logging.Options{Role: "sentinel", Stdout: e.logs, Level: -4})
}

func loadSentinel(p string) (*config.Sentinel, error) { return config.LoadSentinel(p) }
