package sentinel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/logging"
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
				want := n
				if !c.cold {
					benchInbox(b, e, "warm", n)
					if err := s.Tick(b.Context()); err != nil {
						b.Fatal(err)
					}
					e.clk.Advance(queue.MinSpareAge)
					want += n
				}
				create += benchInbox(b, e, "bench", n)
				st0 := s.SpareStats()
				b.StartTimer()
				start, c0 := time.Now(), cpuTime()
				if err := s.Tick(b.Context()); err != nil {
					b.Fatal(err)
				}
				tick += time.Since(start)
				cpu += cpuTime() - c0
				b.StopTimer()
				st := s.SpareStats()
				created += st.Created - st0.Created
				freed += st.Freed - st0.Freed
				if got := len(e.pending()); got != want {
					b.Fatalf("queued %d, want %d", got, want)
				}
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

// benchInbox drops n inbox files (ids evt-<tag>-<i>, written a minute ago
// so the age rule takes them) and returns the time their creation took.
func benchInbox(b *testing.B, e *env, tag string, n int) time.Duration {
	b.Helper()
	old := t0.Add(-time.Minute)
	start := time.Now()
	for i := range n {
		p := filepath.Join(e.l.Inbox(), fmt.Sprintf("%s%04d.json", tag, i))
		data := fmt.Sprintf(`{"id":"evt-%s-%d","type":"demo.hello","payload":{"n":%d}}`, tag, i, i)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	for i := range n {
		p := filepath.Join(e.l.Inbox(), fmt.Sprintf("%s%04d.json", tag, i))
		os.Chtimes(p, old, old)
	}
	return d
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
