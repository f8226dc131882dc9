package general

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/outputs"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

var (
	binDir   string // soldier-spawn and fakeclaude
	fakeBin  string
	spawnBin string
	tmuxC    *tmux.Client
)

func TestMain(m *testing.M) {
	if p := os.Getenv("KINGDOM_REMOVE_TREE"); p != "" {
		removeTreeHelper(p) // hygiene_test.go: runs as nobody, exits
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "kingdom-general-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir = dir
		spawnBin = filepath.Join(dir, "soldier-spawn")
		fakeBin = filepath.Join(dir, "claude")
		for _, b := range [][2]string{{spawnBin, "github.com/kingdom-dev/kingdom/cmd/soldier-spawn"}, {fakeBin, "github.com/kingdom-dev/kingdom/internal/testkit/fakeclaude"}} {
			out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
				return 1
			}
		}
		// The tmux server (and so every soldier) inherits this; the engine must not see it (§9.17).
		os.Setenv("SLACK_BOT_TOKEN", "xoxb-test-secret")
		tmuxC = &tmux.Client{Socket: fmt.Sprintf("kingdom-test-general-%d", os.Getpid())}
		defer tmuxC.KillServer(context.Background())
		return pgtest.Main(m)
	}()
	os.Exit(code)
}

type env struct {
	t      testing.TB
	trace  func(task, m string)
	pollMu sync.Mutex
	polls  map[string]int // soldier watcher polls per task
	l      layout.Layout
	m      *config.Manifest
	sys    *config.System
	g      *General
	clk    clock.Clock
	tm     *tmux.Client // nil: the shared test client
	st     store.Store  // nil until e.store() opens the files store (pg_test.go sets a PostgreSQL one)
	host   string
	// ev is the general's emitter (nil: one on the base dir's events.log).
	ev *eventlog.Emitter
	// staleLease stops the ticks of tickUntil from renewing the host lease
	// (a test of the self-fence).
	staleLease bool
	// svc are the GitHub and Jira the general reads and writes (nil: none
	// reachable, so no test reaches out by accident).
	svc *outputs.Services
	// brk is king.yaml breaker as the general is given it (zero: no
	// brakes).
	brk config.KingBreaker
}

type envOpt func(*env)

func withClock(c clock.Clock) envOpt { return func(e *env) { e.clk = c } }

func newEnv(t *testing.T, opts ...envOpt) *env { return newEnvTB(t, opts...) }

// newEnvB is the benchmark environment: the command engine running the
// fake in its instant mode, 8 soldiers at once.
func newEnvB(b *testing.B) *env {
	e := newEnvTB(b)
	e.sys.Runtime.Engine = "command"
	e.sys.Runtime.Command.Argv = []string{fakeBin, "command", "{task_id}", "{result_path}"}
	e.m.MaxConcurrent = 8
	return e
}

func (e *env) startB(b *testing.B) *General  { return e.start() }
func (e *env) taskB(b *testing.B, id string) { e.task(id) }

func newEnvTB(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	m := config.DefaultManifest()
	m.Name = "gen-test"
	m.TimeoutSeconds = 100
	m.MaxConcurrent = 1
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = fakeBin
	sys.Runtime.Claude.Args = []string{"--permission-mode", "bypassPermissions"}
	e := &env{t: t, l: l, m: m, sys: sys, clk: clock.Real{}, host: "test-host"}
	for _, o := range opts {
		o(e)
	}
	e.writeSystem()
	renewLease(t, e, time.Now())
	return e
}

// services are e.svc, or a GitHub nobody answers at.
func (e *env) services() *outputs.Services {
	if e.svc != nil {
		return e.svc
	}
	return &outputs.Services{GitHubAPI: "http://127.0.0.1:1"}
}

// store is the env's store: the files store of its base dir unless a test
// set one.
func (e *env) store() store.Store {
	e.t.Helper()
	if e.st == nil {
		st, err := files.Open(e.l, e.host)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { st.Close() })
		e.st = st
	}
	return e.st
}

// renewLease sets the host lease file's mtime (start touches it at each
// renewal of the host's lease, in both modes).
func renewLease(t testing.TB, e *env, at time.Time) {
	t.Helper()
	p := e.l.HostLease()
	if err := layout.EnsureDir(filepath.Dir(p)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

func (e *env) writeSystem() {
	e.t.Helper()
	y := fmt.Sprintf("runtime:\n  engine: %s\n  claude:\n    command: %q\n    args: []\n  command:\n    argv: %s\ngit:\n  clone_url: %q\n",
		e.sys.Runtime.Engine, e.sys.Runtime.Claude.Command, jsonList(e.sys.Runtime.Command.Argv), e.sys.Git.CloneURL)
	if err := os.WriteFile(e.l.ConfigFile("system.yaml"), []byte(y), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if _, err := config.LoadSystem(e.l.ConfigFile("system.yaml")); err != nil {
		e.t.Fatalf("test system.yaml invalid: %v", err)
	}
}

func jsonList(a []string) string {
	if a == nil {
		a = []string{}
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// start builds the general (after the test tuned e.m / e.sys).
func (e *env) emitter() *eventlog.Emitter {
	if e.ev != nil {
		return e.ev
	}
	return eventlog.NewEmitter(e.l.EventsLog(), e.l.RotateLock(), e.m.Name, nil)
}

func (e *env) start() *General {
	e.t.Helper()
	e.writeSystem()
	tm := tmuxC
	if e.tm != nil {
		tm = e.tm
	}
	g, err := New(Options{Layout: e.l, Manifest: e.m, System: e.sys, Tmux: tm, Clock: e.clk,
		SpawnBin: spawnBin, PollInterval: 20 * time.Millisecond, Trace: e.traceHook(), Store: e.store(), Host: e.host, Services: e.services(), Breaker: e.brk,
		Events: e.emitter()})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Start(ctx)
	e.t.Cleanup(func() { cancel(); g.Wait() })
	e.g = g
	return g
}

func (e *env) scenario(task string, sc map[string]any) {
	e.t.Helper()
	dir := filepath.Join(e.l.Base, "fake")
	os.MkdirAll(dir, 0o700)
	name := "scenario.json"
	if task != "" {
		name = "scenario-" + task + ".json"
	}
	b, _ := json.Marshal(sc)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) task(id string, mut ...func(*doc.Task)) *doc.Task {
	e.t.Helper()
	t := &doc.Task{ID: id, EventID: "evt-inbox-" + id, TargetGeneral: e.m.Name, Type: "test.run",
		Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(time.Now()), Status: "pending"}
	for _, f := range mut {
		f(t)
	}
	if err := e.tasks().Put(layout.Pending, id, t); err != nil {
		e.t.Fatal(err)
	}
	return t
}

// tasks is the tasks queue of the env's store.
func (e *env) tasks() *queue.Queue {
	return queue.OnStore(e.store(), e.l, layout.QTasks, nil, e.host)
}

// claimed puts task id in in_progress as this host's claim of its attempt
// (a general that ran it before: the reconcile pass settles it).
func (e *env) claimed(id string, mut ...func(*doc.Task)) *doc.Task {
	e.t.Helper()
	t := e.task(id, mut...)
	if err := e.tasks().ClaimAs(layout.Pending, layout.InProgress, id, store.Claim{Holder: e.host, Attempt: t.RetryCount}); err != nil {
		e.t.Fatal(err)
	}
	return t
}

// tickUntil ticks the general until cond holds (a guard, not an assertion
// on speed: the limit only stops a broken test).
func (e *env) tickUntil(what string, cond func() bool) {
	e.t.Helper()
	limit := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(limit) {
			e.t.Fatalf("gave up waiting for %s", what)
		}
		if !e.staleLease {
			// start renews the host lease meanwhile (by the clock the
			// general reads: a fake one may be far ahead).
			renewLease(e.t, e, e.g.o.Clock.Now())
		}
		if err := e.g.Tick(context.Background()); err != nil {
			e.t.Fatalf("tick: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // let soldiers run between ticks
	}
}

func (e *env) final(id string) *doc.Result {
	e.t.Helper()
	var r *doc.Result
	e.tickUntil("final result of "+id, func() bool {
		b, err := os.ReadFile(e.l.ResultFinal(id))
		if err != nil {
			return false
		}
		r, err = schema.DecodeResult(b)
		if err != nil {
			e.t.Fatalf("final result of %s invalid: %v\n%s", id, err, b)
		}
		return true
	})
	e.g.Wait()
	return r
}

type fakeCall struct {
	Args              []string `json:"args"`
	Cwd               string   `json:"cwd"`
	Prompt            string   `json:"prompt"`
	Resume            string   `json:"resume"`
	SlackTokenVisible bool     `json:"slack_token_visible"`
}

// call is the fake claude's record of its last run for task.
func (e *env) call(task string) fakeCall {
	e.t.Helper()
	var b []byte
	for n := 0; ; n++ {
		next, err := os.ReadFile(filepath.Join(e.l.Base, "fake-calls", fmt.Sprintf("%s-%d.json", task, n)))
		if err != nil {
			break
		}
		b = next
	}
	if b == nil {
		e.t.Fatalf("fake claude was not called for %s", task)
	}
	var c fakeCall
	json.Unmarshal(b, &c)
	return c
}

func (e *env) events(typ string) []map[string]any {
	b, _ := os.ReadFile(e.l.EventsLog())
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var ev struct {
			Type  string         `json:"type"`
			Actor string         `json:"actor"`
			Data  map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == typ {
			out = append(out, ev.Data)
		}
	}
	return out
}

func (e *env) soldierSessions() []string {
	ss, _ := tmuxC.List(context.Background())
	var out []string
	for _, s := range ss {
		if strings.HasPrefix(s.Name, "soldier-") {
			out = append(out, s.Name)
		}
	}
	return out
}

func sessionOf(e *env, task string) string {
	return strings.TrimSpace(readTrim(e.l.ResultSoldierID(task)))
}

// traceHook counts the soldier watchers' polls and forwards every mark to
// e.trace (set before start).
func (e *env) traceHook() func(task, m string) {
	next := e.trace
	return func(task, m string) {
		if m == "poll" {
			e.pollMu.Lock()
			if e.polls == nil {
				e.polls = map[string]int{}
			}
			e.polls[task]++
			e.pollMu.Unlock()
		}
		if next != nil {
			next(task, m)
		}
	}
}

// pollCount is how many times the watcher of task has polled.
func (e *env) pollCount(task string) int {
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	return e.polls[task]
}
