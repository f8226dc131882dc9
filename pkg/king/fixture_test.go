package king

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// t0 is the fake clock's start: Saturday 2026-11-21 10:00:00 UTC.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	l   layout.Layout
	st  store.Store // the files store over l, shared by every newKing
	clk *clock.Fake
	cfg *config.King
	k   *King
	// petitionCmd is used by newKing (nil: a command that does not exist).
	petitionCmd []string
}

const genPR = `name: gen-pr
description: Reviews pull requests.
default_repo: acme/web
subscribes: [github.pr.review_requested, github.issue.*]
`

const genHerald = `name: gen-herald
description: Answers direct messages.
subscribes: [slack.channel.message]
`

func newFixture(t *testing.T, manifests ...string) *fixture {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, l: l, st: openStore(t, l), clk: clock.NewFake(t0), cfg: config.DefaultKing()}
	f.cfg.Concurrency.MaxSoldiers = 100
	for _, m := range manifests {
		f.writeManifest(m)
	}
	f.petitionCmd = []string{filepath.Join(l.Base, "no-such-classifier")}
	f.newKing()
	return f
}

// newKing (re)creates the king over the same tree, as a restart would.
func (f *fixture) newKing() *King {
	f.t.Helper()
	k, err := New(Options{
		Layout: f.l, Store: f.st, Host: "test-host", Config: f.cfg, Clock: f.clk, Location: time.UTC,
		Events:          eventlog.NewEmitter(f.l.EventsLog(), f.l.RotateLock(), "king", f.clk),
		PetitionCommand: f.petitionCmd,
		Jitter:          func(d time.Duration) time.Duration { return d },
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.k = k
	return k
}

// openStore opens the files store over l, closed when the test ends.
func openStore(t testing.TB, l layout.Layout) store.Store {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (f *fixture) writeManifest(yaml string) {
	f.t.Helper()
	var name string
	for _, line := range strings.Split(yaml, "\n") {
		if v, ok := strings.CutPrefix(line, "name: "); ok {
			name = strings.TrimSpace(v)
		}
	}
	if err := os.WriteFile(f.l.GeneralManifest(name), []byte(yaml), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) tick() {
	f.t.Helper()
	if err := f.k.Tick(f.t.Context()); err != nil {
		f.t.Fatalf("tick: %v", err)
	}
}

type evOpt func(*doc.Event)

func withPayload(kv map[string]any) evOpt {
	return func(e *doc.Event) { e.Payload = kv }
}
func withSource(s string) evOpt { return func(e *doc.Event) { e.Source = s } }
func withRepo(r string) evOpt   { return func(e *doc.Event) { e.Repo = doc.StringPtr(r) } }
func withCreated(t time.Time) evOpt {
	return func(e *doc.Event) { e.CreatedAt = doc.FormatTime(t) }
}

// event drops an event into events/pending.
func (f *fixture) event(id, typ, prio string, opts ...evOpt) *doc.Event {
	f.t.Helper()
	ev := &doc.Event{ID: id, Type: typ, Source: doc.SourceGitHub, Priority: prio,
		Payload: map[string]any{}, CreatedAt: doc.FormatTime(f.clk.Now()), Status: doc.EventPending}
	for _, o := range opts {
		o(ev)
	}
	writeJSON(f.t, filepath.Join(f.l.QueueState(layout.QEvents, layout.Pending), id+".json"), ev)
	return ev
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// resources writes state/resources.json measured at ts.
func (f *fixture) resources(h, token string, ts time.Time) {
	f.t.Helper()
	r := &health.Resources{Timestamp: doc.FormatTime(ts), Health: h,
		Sessions: health.SessionStats{SoldiersMax: 3}}
	if token != "" {
		r.Tokens = &health.Tokens{Status: token}
	}
	if err := health.Write(f.l.Resources(), r); err != nil {
		f.t.Fatal(err)
	}
}

// ids lists the ids in a queue state, sorted.
func (f *fixture) ids(kind, state string) []string {
	f.t.Helper()
	ents, err := os.ReadDir(f.l.QueueState(kind, state))
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (f *fixture) task(state, id string) *doc.Task {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.l.QueueState(layout.QTasks, state), id+".json"))
	if err != nil {
		f.t.Fatal(err)
	}
	tk, err := schema.DecodeTask(b)
	if err != nil {
		f.t.Fatalf("task %s does not validate: %v", id, err)
	}
	return tk
}

func (f *fixture) message(id string) *doc.Message {
	f.t.Helper()
	for _, st := range layout.QueueStates[layout.QMessages] {
		b, err := os.ReadFile(filepath.Join(f.l.QueueState(layout.QMessages, st), id+".json"))
		if err != nil {
			continue
		}
		m, err := schema.DecodeMessage(b)
		if err != nil {
			f.t.Fatalf("message %s does not validate: %v", id, err)
		}
		return m
	}
	f.t.Fatalf("message %s not found in any state", id)
	return nil
}

func (f *fixture) eventFile(state, id string) (*doc.Event, string) {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.l.QueueState(layout.QEvents, state), id+".json"))
	if err != nil {
		f.t.Fatal(err)
	}
	ev, target, err := decodeEvent(b)
	if err != nil {
		f.t.Fatalf("event %s does not validate: %v", id, err)
	}
	return ev, target
}

// internal returns the internal events of typ from logs/events.log.
func (f *fixture) internal(typ string) []eventlog.Event {
	f.t.Helper()
	fh, err := os.Open(f.l.EventsLog())
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []eventlog.Event
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var e eventlog.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			f.t.Fatalf("events.log line not JSON: %q", sc.Text())
		}
		if err := schema.Validate(doc.KindInternalEvent, sc.Bytes()); err != nil {
			f.t.Fatalf("internal event does not validate: %v", err)
		}
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func data(e eventlog.Event) map[string]any {
	var m map[string]any
	json.Unmarshal(e.Data, &m)
	return m
}

// finalResult writes the general's final result for a task.
func (f *fixture) finalResult(task string, r map[string]any) {
	f.t.Helper()
	base := map[string]any{"task_id": task, "summary": "did it", "general": "gen-pr",
		"duration_seconds": 12.5, "completed_at": doc.FormatTime(f.clk.Now()), "retry_count": 0}
	for k, v := range r {
		base[k] = v
	}
	writeJSON(f.t, f.l.ResultFinal(task), base)
}

// claim moves a task pending → in_progress, as its general would.
func (f *fixture) claim(id string) {
	f.t.Helper()
	if err := os.Rename(filepath.Join(f.l.QueueState(layout.QTasks, layout.Pending), id+".json"),
		filepath.Join(f.l.QueueState(layout.QTasks, layout.InProgress), id+".json")); err != nil {
		f.t.Fatal(err)
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func writeJSONRaw(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func removeFile(p string) error { return os.Remove(p) }

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
