package chamberlain

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// fixedMetrics returns whatever sample the test sets.
type fixedMetrics struct {
	mu  sync.Mutex
	s   Sample
	err error
}

func (f *fixedMetrics) set(cpu, mem, disk float64) {
	f.mu.Lock()
	f.s = Sample{CPU: cpu, Memory: mem, Disk: disk, Load: [3]float64{0.5, 0.4, 0.3}}
	f.mu.Unlock()
}

func (f *fixedMetrics) Sample(context.Context) (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s, f.err
}

// countingTmux is the real tmux client, counting the tmux processes run.
type countingTmux struct {
	c     *tmux.Client
	calls atomic.Int64
}

func (t *countingTmux) List(ctx context.Context) ([]tmux.Session, error) {
	t.calls.Add(1)
	return t.c.List(ctx)
}

func (t *countingTmux) Kill(ctx context.Context, name string) error {
	t.calls.Add(1)
	return t.c.Kill(ctx, name)
}

func privateTmux(t testing.TB) *tmux.Client {
	t.Helper()
	c := &tmux.Client{Bin: "tmux", Socket: fmt.Sprintf("kingdom-test-ch-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { c.KillServer(context.Background()) })
	return c
}

type env struct {
	t   testing.TB
	l   layout.Layout
	clk *clock.Fake
	met *fixedMetrics
	tm  *countingTmux
	cfg Config
	em  *eventlog.Emitter
	st  *files.Store
}

func newEnv(t testing.TB, start time.Time) *env {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	c := config.DefaultChamberlain()
	c.TokenLimits.StatsPath = filepath.Join(l.Base, "no-stats.json")
	e := &env{
		t: t, l: l, clk: clock.NewFake(start), met: &fixedMetrics{},
		tm:  &countingTmux{c: privateTmux(t)},
		cfg: Config{Chamberlain: c, MaxSoldiers: 3, WatchdogInterval: 60 * time.Second},
	}
	e.met.set(10, 10, 10)
	e.em = eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "chamberlain", e.clk)
	t.Cleanup(func() { e.em.Close() })
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	return e
}

// queue is the queue of kind on the test's files store.
func (e *env) queue(kind string) *queue.Queue {
	return queue.OnStore(e.st, e.l, kind, nil, "test-host")
}

func (e *env) role(mode Mode) *Role {
	return e.roleWith(mode, Deps{Clock: e.clk, Metrics: e.met, Tmux: e.tm, Events: e.em, Store: e.st})
}

// roleWith builds the chamberlain from d, closed when the test ends.
func (e *env) roleWith(mode Mode, d Deps) *Role {
	e.t.Helper()
	r, err := New(e.l, e.cfg, d, mode)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

func (e *env) tick(r *Role) {
	e.t.Helper()
	if err := r.Tick(context.Background()); err != nil {
		e.t.Fatalf("tick: %v", err)
	}
}

// events returns the internal events of type typ (all when "") emitted so far
// by actor chamberlain.
func (e *env) events(typ string) []eventlog.Event {
	e.t.Helper()
	var out []eventlog.Event
	paths, _ := filepath.Glob(filepath.Join(e.l.LogsDir(), "events*.log"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			e.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			var ev eventlog.Event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev.Actor == "chamberlain" && (typ == "" || ev.Type == typ) {
				out = append(out, ev)
			}
		}
		f.Close()
	}
	return out
}

// messages returns the pending messages, decoded and schema-checked.
func (e *env) messages() []doc.Message {
	e.t.Helper()
	ents, err := os.ReadDir(e.l.QueueState(layout.QMessages, layout.Pending))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []doc.Message
	for _, de := range ents {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(e.l.QueueState(layout.QMessages, layout.Pending), de.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		m, err := schema.DecodeMessage(b)
		if err != nil {
			e.t.Fatalf("message %s: %v", de.Name(), err)
		}
		out = append(out, *m)
	}
	return out
}

func (e *env) emitAs(typ, actor string, data any) {
	e.t.Helper()
	if err := e.em.EmitAs(typ, actor, data); err != nil {
		e.t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t testing.TB, path string, at time.Time) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		writeFile(t, path, "")
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func dataOf(t testing.TB, ev eventlog.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func tmuxOpts() tmux.NewOptions { return tmux.NewOptions{} }
