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
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

func benchKing(b *testing.B) (*King, layout.Layout) {
	b.Helper()
	l := layout.New(benchTempDir(b))
	if err := l.Ensure(); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(l.GeneralManifest("gen-pr"), []byte(genPR), 0o600)
	cfg := config.DefaultKing()
	cfg.Concurrency.MaxSoldiers = 1 << 30 // measure dispatch, not admission
	k, err := New(Options{Layout: l, Config: cfg, Location: time.UTC, CrashAt: "-"})
	if err != nil {
		b.Fatal(err)
	}
	return k, l
}

// benchEvents writes n pending events and returns the time their creation
// took (the producer's side).
func benchEvents(b *testing.B, l layout.Layout, from, n int) time.Duration {
	b.Helper()
	dir := l.QueueState(layout.QEvents, layout.Pending)
	start := time.Now()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("evt-bench-%06d", i)
		ev := &schema.Event{ID: id, Type: "github.pr.review_requested", Source: "github", Priority: "normal",
			Payload: map[string]any{"pr_number": i}, CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"}
		writeJSONB(b, filepath.Join(dir, id+".json"), ev)
	}
	return time.Since(start)
}

func writeJSONB(b *testing.B, path string, v any) {
	data, _ := jsonMarshal(v)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkKing_OneTick: n events pending, one tick turns them all into
// tasks. Reports events/s and the tick's CPU per event.
//
// Each event costs the king three durable files (dispatched copy, task,
// thread_start); the pending copy's inode carries one of them (spares), the
// other two are new files. On this kind of disk (ext4 without a journal) a
// create skips every inode of its block group freed in the last minute, so
// the figure depends on what was deleted before it: env-create-µs states
// it (what creating each of the n pending files cost just before the tick,
// the producer's side, untimed), creates/event counts the king's own and
// king-create-µs what each cost (in its pool's own directory, placed by
// the kernel when the run's king was made: after mass deletes it may land
// in a group they emptied, which a long-running king's pool does not). The
// runs' files are removed after the package's last benchmark (main_test.go).
func BenchmarkKing_OneTick(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var total, cpu, create time.Duration
			var created int64
			var createTime time.Duration
			iters := 0
			_, sf0 := queue.SyncfsStats()
			for b.Loop() {
				b.StopTimer()
				k, l := benchKing(b)
				create += benchEvents(b, l, 0, n)
				st0 := k.spares.Stats()
				b.StartTimer()
				start, c := time.Now(), proctree.SelfCPU()
				if err := k.Tick(context.Background()); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				cpu += proctree.SelfCPU() - c
				iters++
				b.StopTimer()
				st := k.spares.Stats()
				created += st.Created - st0.Created
				createTime += st.CreateTime - st0.CreateTime
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
			// How many of the 3 files per event were made durable by one
			// syncfs per batch rather than an fdatasync each (queue's
			// syncfs.go: only while the machine's dirty page cache is small).
			_, sf := queue.SyncfsStats()
			b.ReportMetric(float64(sf-sf0)/(3*events), "syncfs-share")
			b.ReportMetric(float64(create.Nanoseconds())/events/1e3, "env-create-µs")
			b.ReportMetric(float64(created)/events, "creates/event")
			if created > 0 {
				b.ReportMetric(float64(createTime.Nanoseconds())/float64(created)/1e3, "king-create-µs")
			}
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
		ev := &schema.Event{ID: id, Type: "github.pr.review_requested", Source: "github", Priority: "normal",
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
