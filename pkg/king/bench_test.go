package king

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/runner"
)

func benchKing(b *testing.B) (*King, layout.Layout) {
	b.Helper()
	l := layout.New(b.TempDir())
	if err := l.Ensure(); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(l.GeneralManifest("gen-pr"), []byte(genPR), 0o600)
	cfg := config.DefaultKing()
	cfg.Concurrency.MaxSoldiers = 1 << 30 // measure dispatch, not admission
	k, err := New(Options{Layout: l, Store: openStore(b, l), Host: "test-host", Config: cfg, Location: time.UTC})
	if err != nil {
		b.Fatal(err)
	}
	return k, l
}

// benchEvents writes n pending events.
func benchEvents(b *testing.B, l layout.Layout, from, n int) {
	b.Helper()
	dir := l.QueueState(layout.QEvents, layout.Pending)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("evt-bench-%06d", i)
		ev := &doc.Event{ID: id, Type: "github.pr.review_requested", Source: "github", Priority: "normal",
			Payload: map[string]any{"pr_number": i}, CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"}
		writeJSONB(b, filepath.Join(dir, id+".json"), ev)
	}
}

func writeJSONB(b *testing.B, path string, v any) {
	data, _ := jsonMarshal(v)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkKing_OneTick: n events pending, one tick turns them all into
// tasks, each with its three durable files (dispatched copy, task,
// thread_start) written one after the other in §9.2's order. Reports
// events/s and the tick's CPU per event.
func BenchmarkKing_OneTick(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var total, cpu time.Duration
			iters := 0
			for b.Loop() {
				b.StopTimer()
				k, l := benchKing(b)
				benchEvents(b, l, 0, n)
				b.StartTimer()
				start, c := time.Now(), proctree.SelfCPU()
				if err := k.Tick(context.Background()); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				cpu += proctree.SelfCPU() - c
				iters++
				b.StopTimer()
				if got := k.tasks.Count(layout.Pending); got != n {
					b.Fatalf("tasks = %d, want %d", got, n)
				}
				b.StartTimer()
			}
			events := float64(n * iters)
			b.ReportMetric(events/total.Seconds(), "events/s")
			// The tick's CPU (every thread of the process) per event: on a
			// shared machine wall time follows the neighbours' load, CPU
			// much less.
			b.ReportMetric(float64(cpu.Microseconds())/events, "cpu-µs/event")
		})
	}
}

// BenchmarkKing_SteadyState: events arrive in batches of 100 with a tick
// after each batch, until n have flowed. Reports events/s.
func BenchmarkKing_SteadyState(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var total time.Duration
			iters := 0
			for b.Loop() {
				b.StopTimer()
				k, l := benchKing(b)
				for sent := 0; sent < n; sent += 100 {
					benchEvents(b, l, sent, 100)
					b.StartTimer()
					start := time.Now()
					if err := k.Tick(context.Background()); err != nil {
						b.Fatal(err)
					}
					total += time.Since(start)
					b.StopTimer()
				}
				iters++
				b.StartTimer()
			}
			b.ReportMetric(float64(n*iters)/total.Seconds(), "events/s")
		})
	}
}

// BenchmarkKing_Latency: the king runs under the real runner (fsnotify
// wake, 10 s idle interval); each iteration renames one event into pending/
// and waits for its task file. Reports p50/p99 in ms.
func BenchmarkKing_Latency(b *testing.B) {
	k, l := benchKing(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, runner.Options{Role: layout.RoleKing, Layout: l, Interval: 10 * time.Second,
			Watches: Watches(l)}, k)
	}()
	defer func() { cancel(); <-done }()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(l.QueueState(layout.QTasks, layout.Pending)); err != nil {
		b.Fatal(err)
	}
	staging := filepath.Join(l.Base, "staging")
	os.MkdirAll(staging, 0o700)
	time.Sleep(200 * time.Millisecond) // let the runner take the lock and finish its first tick
	var lat []time.Duration
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("evt-lat-%06d", i)
		i++
		ev := &doc.Event{ID: id, Type: "github.pr.review_requested", Source: "github", Priority: "normal",
			Payload: map[string]any{}, CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"}
		tmp := filepath.Join(staging, id+".json")
		writeJSONB(b, tmp, ev)
		start := time.Now()
		if err := os.Rename(tmp, filepath.Join(l.QueueState(layout.QEvents, layout.Pending), id+".json")); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case e := <-w.Events:
				if e.Has(fsnotify.Create) && filepath.Ext(e.Name) == ".json" && filepath.Base(e.Name)[0] != '.' {
					break wait
				}
			case <-timeout:
				b.Fatal("no task within 30 s")
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkKing_BacklogTick: n events wait (every soldier slot is taken)
// and one more arrives before each tick, as in a backlog that grows while
// work runs. The king lists and reads every pending event each tick (it
// keeps no cache of past decisions); this reports how long such a tick
// takes, the figure that would justify a cache (a tick over 100 ms on a
// journaled disk at 1,000 waiting events).
func BenchmarkKing_BacklogTick(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l := layout.New(b.TempDir())
			if err := l.Ensure(); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(l.GeneralManifest("gen-pr"), []byte(genPR), 0o600)
			cfg := config.DefaultKing()
			cfg.Concurrency.MaxSoldiers = 0
			k, err := New(Options{Layout: l, Store: openStore(b, l), Host: "test-host", Config: cfg, Location: time.UTC})
			if err != nil {
				b.Fatal(err)
			}
			benchEvents(b, l, 0, n)
			if err := k.Tick(context.Background()); err != nil {
				b.Fatal(err)
			}
			var total, cpu time.Duration
			i := n
			for b.Loop() {
				b.StopTimer()
				benchEvents(b, l, i, 1)
				i++
				b.StartTimer()
				start, c := time.Now(), proctree.SelfCPU()
				if err := k.Tick(context.Background()); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				cpu += proctree.SelfCPU() - c
			}
			if got := k.tasks.Count(layout.Pending); got != 0 {
				b.Fatalf("tasks = %d, want 0 (every slot taken)", got)
			}
			iters := float64(i - n)
			b.ReportMetric(float64(total.Microseconds())/iters/1000, "tick-ms")
			b.ReportMetric(float64(cpu.Microseconds())/iters/1000, "tick-cpu-ms")
		})
	}
}
