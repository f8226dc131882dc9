package chamberlain

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

var benchTypes = []string{"task.completed", "task.failed", "soldier.spawned", "event.detected", "event.dispatched", "message.sent"}

func appendEvents(b *testing.B, path string, from, n int) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := from; i < from+n; i++ {
		fmt.Fprintf(w, `{"ts":"2026-11-21T11:00:00Z","type":%q,"actor":"gen-pr","data":{"task_id":"task-20261121-%03d","event_id":"evt-inbox-x-%d","duration_seconds":%d}}`+"\n",
			benchTypes[i%len(benchTypes)], i%1000, i, i%600)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

func benchConsumeFromZero(b *testing.B, lines int) {
	e := newEnv(b, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	appendEvents(b, e.l.EventsLog(), 0, lines)
	fi, _ := os.Stat(e.l.EventsLog())
	b.SetBytes(fi.Size())
	cpu0 := proctree.SelfCPU()
	b.ResetTimer()
	defer func() {
		// CPU of the whole process (GC included) per run: the figure that
		// does not move when other work shares the machine.
		b.ReportMetric(float64((proctree.SelfCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}()
	for i := 0; i < b.N; i++ {
		r, err := New(e.l, e.cfg, Deps{Clock: e.clk, Metrics: e.met, Tmux: e.tm, Store: e.st}, ModeOnce)
		if err != nil {
			b.Fatal(err)
		}
		r.load(e.clk.Now())
		if err := r.consume(b.Context()); err != nil {
			b.Fatal(err)
		}
		if r.stats.Events != int64(lines) {
			b.Fatalf("consumed %d, want %d", r.stats.Events, lines)
		}
		r.Close()
	}
}

func BenchmarkConsume_100kFromZero(b *testing.B) { benchConsumeFromZero(b, 100_000) }
func BenchmarkConsume_1MFromZero(b *testing.B)   { benchConsumeFromZero(b, 1_000_000) }

func benchConsumeIncremental(b *testing.B, lines int) {
	e := newEnv(b, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	appendEvents(b, e.l.EventsLog(), 0, lines)
	r := e.role(ModeOnce)
	r.load(e.clk.Now())
	if err := r.consume(b.Context()); err != nil {
		b.Fatal(err)
	}
	next := lines
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		appendEvents(b, e.l.EventsLog(), next, 100)
		next += 100
		b.StartTimer()
		if err := r.consume(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if r.stats.Events != int64(next) {
		b.Fatalf("consumed %d, want %d", r.stats.Events, next)
	}
}

// 100 new lines after a 100k- or 1M-line file: the cost must not depend on
// the file's size (byte-offset cursor).
func BenchmarkConsume_100NewAfter100k(b *testing.B) { benchConsumeIncremental(b, 100_000) }
func BenchmarkConsume_100NewAfter1M(b *testing.B)   { benchConsumeIncremental(b, 1_000_000) }

// BenchmarkTick_100Sessions is one full daemon tick with 100 live soldier
// sessions registered in sessions.json; tmux-procs/op counts the tmux
// processes it starts.
func BenchmarkTick_100Sessions(b *testing.B) {
	e := newEnv(b, time.Now())
	var es []sessions.Entry
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("soldier-%d-b%02d", 1700000000+i, i)
		if err := e.tm.c.NewSession(b.Context(), id, tmuxOpts(), "sleep", "600"); err != nil {
			b.Fatal(err)
		}
		es = append(es, sessions.Entry{ID: id, TaskID: fmt.Sprintf("task-20261121-%03d", i), General: "gen-pr", StartedAt: e.clk.Now()})
	}
	if err := sessions.New(e.l).Replace(es); err != nil {
		b.Fatal(err)
	}
	for _, role := range []string{"sentinel", "king", "envoy"} {
		setMtime(b, e.l.Heartbeat(role), e.clk.Now())
	}
	r := e.role(ModeDaemon)
	if err := r.Tick(b.Context()); err != nil { // first tick: daily jobs, temp sweep
		b.Fatal(err)
	}
	e.tm.calls.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.clk.Advance(30 * time.Second)
		if err := r.Tick(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(e.tm.calls.Load())/float64(b.N), "tmux-procs/op")
	if got := len(r.Last.Registered); got != 100 {
		b.Fatalf("registry = %d entries, want 100", got)
	}
}
