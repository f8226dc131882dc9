package sentinel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
)

// BenchmarkInboxTick measures one tick admitting n inbox files (read,
// validate, dedupe check, group-committed queue write, seen journal,
// event.detected, the consumed file into the spare pool), per event.
//
// It measures the steady state: before the timed tick the same sentinel
// admitted a batch of n earlier files (untimed) and its clock moved on by
// the pool's rest, so its spare pool holds those files' inodes, as it does
// in a sentinel that has been running. "cold-n" is a fresh sentinel's first
// batch, every event a new file.
//
// On this kind of disk (ext4 without a journal) a create skips every inode
// of its block group freed in the last minute, so a benchmark that creates
// pays for what the benchmarks before it deleted. The figure states its
// environment beside it: env-create-µs is what creating each of the batch's
// inbox files (the producer's side, untimed) cost just before the tick, and
// creates/event and frees/event count the files the sentinel itself
// created and unlinked in the timed tick (0 and 0 in the steady state: it
// neither pays for the disk's recent deletes nor adds to them).
func BenchmarkInboxTick(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		cold bool
	}{{"100", 100, false}, {"1000", 1000, false}, {"cold-1000", 1000, true}} {
		b.Run(c.name, func(b *testing.B) {
			n := c.n
			var tick, cpu, create time.Duration
			var created, freed int64
			iters := 0
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b)
				in := inbox.New(inbox.Config{Dir: e.l.Inbox(), RejectedDir: e.l.InboxRejected(), Clock: e.clk})
				s := sentinel.NewWith(sentinel.Options{Layout: e.l, Clock: e.clk, Events: e.em, Log: logging.Discard()}, in)
				// As in production: the notifier runs, and producers
				// publish by rename (only such files are recycled).
				ctx, cancel := context.WithCancel(b.Context())
				if err := s.Start(ctx); err != nil {
					b.Fatal(err)
				}
				want := n
				if !c.cold {
					benchInbox(b, e, s, "warm", n)
					if err := s.Tick(b.Context()); err != nil {
						b.Fatal(err)
					}
					e.clk.Advance(queue.MinSpareAge)
					want += n
				}
				create += benchInbox(b, e, s, "bench", n)
				st0 := s.SpareStats()
				b.StartTimer()
				start, c0 := time.Now(), proctree.SelfCPU()
				if err := s.Tick(b.Context()); err != nil {
					b.Fatal(err)
				}
				tick += time.Since(start)
				cpu += proctree.SelfCPU() - c0
				b.StopTimer()
				st := s.SpareStats()
				created += st.Created - st0.Created
				freed += st.Freed - st0.Freed
				if got := len(e.pending()); got != want {
					b.Fatalf("queued %d, want %d", got, want)
				}
				cancel()
				iters++
				b.StartTimer()
			}
			events := float64(iters * n)
			b.ReportMetric(float64(tick.Nanoseconds())/events/1e3, "µs/event")
			b.ReportMetric(float64(cpu.Nanoseconds())/events/1e3, "cpu-µs/event")
			b.ReportMetric(float64(create.Nanoseconds())/events/1e3, "env-create-µs")
			b.ReportMetric(float64(created)/events, "creates/event")
			b.ReportMetric(float64(freed)/events, "frees/event")
		})
	}
}

// benchInbox publishes n inbox files by rename (ids evt-<tag>-<i>), waits
// until the notifier has seen them all, and returns the time their
// creation took (the producer's side).
func benchInbox(b *testing.B, e *env, s *sentinel.Sentinel, tag string, n int) time.Duration {
	b.Helper()
	var d time.Duration
	for i := range n {
		name := fmt.Sprintf("%s%04d.json", tag, i)
		tmp := filepath.Join(e.l.Inbox(), "."+name+".tmp")
		data := fmt.Sprintf(`{"id":"evt-%s-%d","type":"demo.hello","payload":{"n":%d}}`, tag, i, i)
		start := time.Now()
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
		d += time.Since(start)
		if err := os.Rename(tmp, filepath.Join(e.l.Inbox(), name)); err != nil {
			b.Fatal(err)
		}
	}
	// The notifier has read every rename once it stays quiet (untimed).
	select {
	case <-s.Wake():
	case <-time.After(10 * time.Second):
		b.Fatal("no wake-up after the renames")
	}
	for quiet := false; !quiet; {
		select {
		case <-s.Wake():
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}
	return d
}

// BenchmarkGitHubPoll measures a full poll against the local fake: a 304
// round (the steady state).
func BenchmarkGitHubPoll304(b *testing.B) {
	e := newEnv(b)
	gh := newFakeGitHub(b, readFixture(b, "github/testdata/notifications.json"))
	s := e.sentinel(e.config(gh.yaml("")))
	if err := s.Tick(b.Context()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e.clk.Advance(time.Minute)
		if err := s.Tick(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
