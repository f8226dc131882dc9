package sentinel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// drop writes inbox/<name> with the given mtime.
func (e *env) drop(name, body string, mtime time.Time) string {
	e.t.Helper()
	p := filepath.Join(e.l.Inbox(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

const inboxYAML = "polling:\n  inbox:\n    interval_seconds: 10\n"

func TestInbox_ValidFilesAreQueuedAndDeleted(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	old := t0.Add(-5 * time.Second)
	withID := e.drop("review.json", `{"id":"evt-ci-build-77","type":"ci.build.failed","repo":"octocat/Hello-World","payload":{"build":77},"priority":"high"}`, old)
	noID := e.drop("hello.json", `{"type":"demo.hello"}`, old)
	e.drop(".tmp-writer-1.json", `{"type":"half`, old) // a producer's dot-temp
	e.drop("notes.txt", `not an event`, old)
	e.tick(s)

	genID := "evt-inbox-hello-" + itoa(old.Unix())
	if got := sorted(e.pending()); got != sorted([]string{"evt-ci-build-77", genID}) {
		t.Fatalf("pending = %s", got)
	}
	ev := e.event("evt-ci-build-77")
	if ev.Source != "inbox" || ev.Type != "ci.build.failed" || ev.Priority != "high" || *ev.Repo != "octocat/Hello-World" ||
		ev.CreatedAt != "2026-11-21T10:00:00Z" || ev.Status != "pending" || ev.Payload["build"] != float64(77) {
		t.Errorf("event = %+v", ev)
	}
	ev2 := e.event(genID)
	if ev2.Priority != "normal" || ev2.Repo != nil || ev2.Payload == nil {
		t.Errorf("defaults = %+v", ev2)
	}
	if exists(withID) || exists(noID) {
		t.Error("queued inbox files not deleted")
	}
	if !exists(filepath.Join(e.l.Inbox(), ".tmp-writer-1.json")) || !exists(filepath.Join(e.l.Inbox(), "notes.txt")) {
		t.Error("dot-temp or non-json file touched")
	}
	if got := sorted(e.detected()); got != sorted([]string{"evt-ci-build-77", genID}) {
		t.Errorf("event.detected = %s", got)
	}
	if seen, err := e.st.Seen(t.Context(), "evt-ci-build-77"); err != nil || !seen {
		t.Errorf("seen index: %v, %v; want seen", seen, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestInbox_YoungFilesWait(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	p := e.drop("fresh.json", `{"type":"demo.hello","id":"evt-fresh-1"}`, t0.Add(-300*time.Millisecond))
	e.tick(s)
	if len(e.pending()) != 0 || !exists(p) {
		t.Fatalf("a 300 ms old file was read: pending %v", e.pending())
	}
	// The sentinel asks to be woken when the file is 1 s old.
	select {
	case <-s.Wake():
	case <-time.After(60 * time.Second): // real timer of ~0.7 s; generous bound only to avoid a hang
		t.Fatal("no wake-up for the waiting file")
	}
	e.clk.Advance(800 * time.Millisecond)
	e.tick(s)
	if got := sorted(e.pending()); got != "evt-fresh-1" || exists(p) {
		t.Errorf("after 1.1 s: pending %s, file still there %v", got, exists(p))
	}
}

func TestInbox_InvalidFilesAreRejectedWithReason(t *testing.T) {
	cases := map[string]string{
		"notjson.json":  `{"type": "x"`,
		"notype.json":   `{"payload":{}}`,
		"badprio.json":  `{"type":"x","priority":"urgent"}`,
		"badid.json":    `{"id":"../../etc/passwd","type":"x"}`,
		"dotdot.json":   `{"id":"evt..x","type":"x"}`,
		"badrepo.json":  `{"type":"x","repo":"../../../"}`,
		"array.json":    `[1,2]`,
		"empty.json":    ``,
		"bad name.json": `{"type":"x"}`, // no id and a name that makes no valid one
	}
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	for name, body := range cases {
		e.drop(name, body, t0.Add(-time.Minute))
	}
	// Over the 1 MiB limit, and a symlink (never followed).
	e.drop("huge.json", `{"type":"x","payload":{"pad":"`+strings.Repeat("a", 1<<20)+`"}}`, t0.Add(-time.Minute))
	cases["huge.json"] = ""
	if err := os.Symlink("/etc/hostname", filepath.Join(e.l.Inbox(), "link.json")); err != nil {
		t.Fatal(err)
	}
	cases["link.json"] = ""
	good := e.drop("good.json", `{"id":"evt-good-1","type":"x"}`, t0.Add(-time.Minute))
	e.tick(s)
	if got := sorted(e.pending()); got != "evt-good-1" || exists(good) {
		t.Errorf("pending = %s (good file left: %v)", got, exists(good))
	}
	for name := range cases {
		if exists(filepath.Join(e.l.Inbox(), name)) {
			t.Errorf("%s left in inbox/", name)
		}
		rej := filepath.Join(e.l.InboxRejected(), name)
		if !exists(rej) {
			t.Errorf("%s not in inbox/rejected/", name)
			continue
		}
		reason, err := os.ReadFile(rej + ".reason")
		if err != nil || len(strings.TrimSpace(string(reason))) < 5 {
			t.Errorf("%s: reason %q (%v)", name, reason, err)
		}
	}
	ev, _ := os.ReadFile(e.l.EventsLog())
	if n := strings.Count(string(ev), `"system.file_rejected"`); n != len(cases) {
		t.Errorf("system.file_rejected events = %d, want %d", n, len(cases))
	}
	if n := e.logs.count("bad input skipped"); n != len(cases) {
		t.Errorf("log lines for bad files = %d, want %d:\n%s", n, len(cases), e.logs)
	}
	// The next tick is quiet: nothing loops on a poison file.
	e.tick(s)
	if n := e.logs.count("bad input skipped"); n != len(cases) {
		t.Errorf("rejected files were read again")
	}
}

func TestInbox_DuplicateIsDeletedWithALogLine(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	e.drop("a.json", `{"id":"evt-once","type":"x"}`, t0.Add(-time.Minute))
	e.tick(s)
	p := e.drop("b.json", `{"id":"evt-once","type":"x","payload":{"again":true}}`, t0.Add(-time.Minute))
	e.tick(s)
	if exists(p) {
		t.Error("duplicate inbox file not deleted")
	}
	if len(e.pending()) != 1 || len(e.detected()) != 1 {
		t.Errorf("duplicate queued: %v", e.pending())
	}
	if e.event("evt-once").Payload["again"] != nil {
		t.Error("duplicate overwrote the queued event")
	}
	if !strings.Contains(e.logs.String(), "already queued or seen, deleting the file") {
		t.Errorf("no log line for the duplicate:\n%s", e.logs)
	}
}

// Dedupe (seed 002): ids in pending/, dispatched/ or seen/ are skipped.
func TestDedupe_PendingDispatchedSeen(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	mk := func(id string) watcher.Item {
		return watcher.Item{Key: id, Event: doc.Event{ID: id, Type: "x", Source: "inbox", Payload: map[string]any{},
			Priority: "normal", CreatedAt: doc.FormatTime(t0), Status: "pending"}}
	}
	if err := e.q.Put(layout.Pending, "evt-p", mk("evt-p").Event); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Put(layout.Dispatched, "evt-d", mk("evt-d").Event); err != nil {
		t.Fatal(err)
	}
	// A marker 29 days old still counts (kept 30 days, pruned by the chamberlain).
	os.MkdirAll(e.l.SeenDir(), 0o700)
	marker := filepath.Join(e.l.SeenDir(), "evt-s")
	os.WriteFile(marker, nil, 0o600)
	os.Chtimes(marker, t0.Add(-29*24*time.Hour), t0.Add(-29*24*time.Hour))

	for _, id := range []string{"evt-p", "evt-d", "evt-s"} {
		if r := s.Emit(mk(id), nil); r.Outcome != watcher.Duplicate {
			t.Errorf("%s: outcome %s, want duplicate", id, r.Outcome)
		}
	}
	if e.q.Exists(layout.Pending, "evt-d") || e.q.Exists(layout.Pending, "evt-s") {
		t.Error("a known id was queued again")
	}
	if r := s.Emit(mk("evt-new"), nil); r.Outcome != watcher.Admitted {
		t.Errorf("new id: %s", r.Outcome)
	}
	if r := s.Emit(mk("evt-new"), nil); r.Outcome != watcher.Duplicate {
		t.Errorf("second emit of a new id: %s", r.Outcome)
	}
	if got := sorted(e.detected()); got != "evt-new" {
		t.Errorf("event.detected = %s, want only evt-new", got)
	}
}

// failingWatcher always fails to fetch.
type failingWatcher struct{ calls int }

func (f *failingWatcher) Name() string            { return "broken" }
func (f *failingWatcher) Interval() time.Duration { return time.Second }
func (f *failingWatcher) Fetch(context.Context) (*watcher.Batch, error) {
	f.calls++
	return nil, errors.New("upstream is down")
}
func (f *failingWatcher) PostEmit(context.Context, *watcher.Batch, []watcher.Result) error {
	return nil
}

type panickyWatcher struct{}

func (panickyWatcher) Name() string            { return "panicky" }
func (panickyWatcher) Interval() time.Duration { return time.Second }
func (panickyWatcher) Fetch(context.Context) (*watcher.Batch, error) {
	panic("parser bug")
}
func (panickyWatcher) PostEmit(context.Context, *watcher.Batch, []watcher.Result) error { return nil }

func TestSentinel_FailingWatcherNeverStopsOthers(t *testing.T) {
	e := newEnv(t)
	broken := &failingWatcher{}
	in := inbox.New(inbox.Config{Dir: e.l.Inbox(), RejectedDir: e.l.InboxRejected(), Clock: e.clk})
	s := sentinel.NewWith(sentinel.Options{Layout: e.l, Clock: e.clk, Events: e.em, Store: e.st, Host: "test-host",
		Log: newLogger(e)}, broken, panickyWatcher{}, in)
	e.drop("a.json", `{"id":"evt-a","type":"x"}`, t0.Add(-time.Minute))
	if err := s.Tick(t.Context()); err != nil {
		t.Fatalf("a remote failure failed the tick: %v", err)
	}
	if got := sorted(e.pending()); got != "evt-a" {
		t.Errorf("inbox starved by a failing watcher: %s", got)
	}
	if !strings.Contains(e.logs.String(), "upstream is down") || !strings.Contains(e.logs.String(), "parser bug") {
		t.Errorf("failures not logged:\n%s", e.logs)
	}
	// Each on its own interval: not again before 1 s has passed.
	s.Tick(t.Context())
	if broken.calls != 1 {
		t.Errorf("broken watcher polled %d times within its interval", broken.calls)
	}
	e.clk.Advance(time.Second)
	s.Tick(t.Context())
	if broken.calls != 2 {
		t.Errorf("broken watcher not retried next interval: %d calls", broken.calls)
	}
}

func TestSentinel_ConfigSelectsWatchersAndIntervals(t *testing.T) {
	e := newEnv(t)
	gh := newFakeGitHub(t)
	fj := newFakeJira(t)
	yaml := gh.yaml("") + strings.TrimPrefix(fj.yaml(), "polling:\n") + "  inbox:\n    interval_seconds: 3\n"
	s := e.sentinel(e.config(yaml))
	if got := strings.Join(s.Watchers(), ","); got != "github,jira,inbox" {
		t.Errorf("watchers = %s", got)
	}
	if s.RunnerInterval() != 3*time.Second {
		t.Errorf("runner interval = %v, want 3s", s.RunnerInterval())
	}
	if w := s.Watches(); len(w) != 1 || w[0].Dir != e.l.Inbox() || !w[0].Match("x.json") || w[0].Match(".tmp-x.json") || w[0].Match("x.txt") {
		t.Errorf("watches = %+v", w)
	}
	s2 := e.sentinel(e.config(gh.yaml("")))
	if got := strings.Join(s2.Watchers(), ","); got != "github" || s2.RunnerInterval() != 10*time.Second || s2.Watches() != nil {
		t.Errorf("github only: %s %v %v", got, s2.RunnerInterval(), s2.Watches())
	}
	p := e.l.ConfigFile("sentinel.yaml")
	os.WriteFile(p, []byte("polling:\n  gitlab: {}\n"), 0o600)
	if _, err := loadSentinel(p); err == nil || !strings.Contains(err.Error(), "gitlab") {
		t.Errorf("unknown watcher key: err = %v", err)
	}
}

// Issue #13 items 3 and 8: a directory named x.json would sit in inbox/
// forever, and an inbox file may not speak for Slack, GitHub, Jira or the
// schedules (SPEC §10.15): both go to inbox/rejected/ with a reason.
func TestInbox_DirectoriesAndReservedTypesAreRejected(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	if err := os.Mkdir(filepath.Join(e.l.Inbox(), "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dir.json": "directory"}
	for i, typ := range []string{"slack.thread.reply", "github.issue.opened", "jira.issue.created", "schedule.daily", "Slack.Message"} {
		name := "forged-" + itoa(int64(i)) + ".json"
		e.drop(name, `{"id":"evt-forged-`+itoa(int64(i))+`","type":"`+typ+`","payload":{"text":"x"}}`, t0.Add(-time.Minute))
		want[name] = "reserved"
	}
	good := e.drop("good.json", `{"id":"evt-good-1","type":"deploy.requested"}`, t0.Add(-time.Minute))
	e.tick(s)
	if got := sorted(e.pending()); got != "evt-good-1" || exists(good) {
		t.Errorf("pending = %s (good file left: %v), want only evt-good-1", got, exists(good))
	}
	for name, word := range want {
		rej := filepath.Join(e.l.InboxRejected(), name)
		if exists(filepath.Join(e.l.Inbox(), name)) || !exists(rej) {
			t.Errorf("%s not moved to inbox/rejected/", name)
			continue
		}
		reason, err := os.ReadFile(rej + ".reason")
		if err != nil || !strings.Contains(string(reason), word) {
			t.Errorf("%s: reason %q (%v), want it to mention %q", name, reason, err, word)
		}
	}
}
