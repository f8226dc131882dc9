package envoy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type harness struct {
	t      testing.TB
	l      layout.Layout
	e      *Envoy
	clock  *clock.Fake
	fake   *slackfake.Server // nil in console mode
	stdout *bytes.Buffer

	mu     sync.Mutex
	sleeps []time.Duration
}

type setup struct {
	console bool
	cfg     func(*config.Envoy)
	base    string // "" = a fresh t.TempDir()
}

func newHarness(t testing.TB, s setup) *harness {
	t.Helper()
	t.Setenv(config.EnvDefaultChannel, "")
	base := s.base
	if base == "" {
		base = t.TempDir()
	}
	h := &harness{t: t, l: layout.New(base), clock: clock.NewFake(t0), stdout: &bytes.Buffer{}}
	if err := h.l.Ensure(); err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultEnvoy()
	cfg.Slack.DefaultChannel = "CDEFAULT"
	cfg.Slack.AllowedUsers = []string{"UALICE"}
	var bot, app string
	if !s.console {
		h.fake = slackfake.New()
		t.Cleanup(h.fake.Close)
		cfg.Slack.APIURL = h.fake.APIURL()
		bot, app = "xoxb-test-bot-token", "xapp-test-app-token"
	}
	if s.cfg != nil {
		s.cfg(cfg)
	}
	em := eventlog.NewEmitter(h.l.EventsLog(), h.l.RotateLock(), "envoy", h.clock)
	e, err := New(Options{Layout: h.l, Store: openStore(t, h.l), Host: testHost, Config: cfg, Events: em, Clock: h.clock, BotToken: bot, AppToken: app,
		Stdout: h.stdout, PingInterval: 2 * time.Second,
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.sleeps = append(h.sleeps, d)
			h.mu.Unlock()
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	return h
}

// testHost is the host id of the tests' file stores.
const testHost = "test-host"

// openStore opens a file store on l, closed when the test ends: what a
// process of the envoy opens at its start.
func openStore(t testing.TB, l layout.Layout) store.Store {
	t.Helper()
	st, err := files.Open(l, testHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (h *harness) Sleeps() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

// startSocket opens Socket Mode against the fake and waits for the link.
func (h *harness) startSocket() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	if err := h.e.Start(ctx); err != nil {
		h.t.Fatal(err)
	}
	if err := h.fake.WaitConnected(60 * time.Second); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) tick() {
	h.t.Helper()
	if err := h.e.Tick(h.t.Context()); err != nil {
		h.t.Fatalf("tick: %v", err)
	}
}

// checkpoint writes the state files now (a tick writes them at its end).
func (h *harness) checkpoint() {
	h.t.Helper()
	if err := h.e.st.flush(h.t.Context()); err != nil {
		h.t.Fatalf("checkpoint: %v", err)
	}
}

// records returns the delivery records in the envoy's store.
func (h *harness) records() map[string]deliveryRecord {
	h.t.Helper()
	vals, err := h.e.st.st.Values(context.Background(), store.NSDeliveries)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]deliveryRecord{}
	for id, b := range vals {
		var r deliveryRecord
		if err := json.Unmarshal(b, &r); err != nil {
			h.t.Fatalf("record %s: %v", id, err)
		}
		out[id] = r
	}
	return out
}

// message builds a valid message document.
func message(id, typ, task string) map[string]any {
	m := map[string]any{
		"id": id, "type": typ, "urgency": "normal", "content": "content of " + id,
		"context": map[string]any{}, "source_ref": nil, "created_at": doc.FormatTime(t0), "status": "pending",
	}
	if task == "" {
		m["task_id"] = nil
	} else {
		m["task_id"] = task
	}
	return m
}

var seq int

func (h *harness) put(m map[string]any) {
	h.t.Helper()
	// Distinct created_at keeps "oldest first" equal to put order.
	seq++
	if m["created_at"] == doc.FormatTime(t0) {
		m["created_at"] = doc.FormatTime(t0.Add(time.Duration(seq) * time.Second))
	}
	if err := h.e.messages.Put(layout.Pending, m["id"].(string), m); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) state() *State {
	h.t.Helper()
	var out *State
	if err := h.e.st.view(h.t.Context(), func(s *State) { out = s }); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// msgState returns the queue state holding message id.
func (h *harness) msgState(id string) string {
	s, _ := h.e.messages.Find(id)
	return s
}

// internal returns the internal events of type typ from events.log.
func (h *harness) internal(typ string) []map[string]any {
	h.t.Helper()
	f, err := os.Open(h.l.EventsLog())
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev eventlog.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != typ {
			continue
		}
		var d map[string]any
		json.Unmarshal(ev.Data, &d)
		out = append(out, d)
	}
	return out
}

// events returns the queued events (pending) by id.
func (h *harness) events() map[string]*doc.Event {
	h.t.Helper()
	dir := h.l.QueueState(layout.QEvents, layout.Pending)
	ents, _ := os.ReadDir(dir)
	out := map[string]*doc.Event{}
	for _, de := range ents {
		if strings.HasPrefix(de.Name(), ".") || !strings.HasSuffix(de.Name(), ".json") {
			continue // a write in progress (.tmp-*), not a queued event yet
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			h.t.Fatal(err)
		}
		ev, err := schema.DecodeEvent(b)
		if err != nil {
			h.t.Fatalf("event %s does not pass its schema: %v", de.Name(), err)
		}
		out[ev.ID] = ev
	}
	return out
}

// waitEvents waits until n events are queued (the deadline only ends a
// test whose events never come; a loaded machine is slow, not wrong).
func (h *harness) waitEvents(n int) map[string]*doc.Event {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs := h.events()
		if len(evs) >= n || time.Now().After(deadline) {
			if len(evs) < n {
				h.t.Fatalf("got %d events, want %d", len(evs), n)
			}
			return evs
		}
		time.Sleep(5 * time.Millisecond) // polling the files the socket goroutine writes
	}
}

func replyContext(task string) map[string]any {
	return map[string]any{"general": "gen-pr", "session_id": "sess-1", "repo": "acme/web", "task_id": task}
}
