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
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
)

// BenchmarkInboxTick measures one tick admitting n inbox files (read,
// validate, dedupe check, group-committed queue write, seen journal,
// event.detected, the consumed file removed), per event.
func BenchmarkInboxTick(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var tick, cpu time.Duration
			iters := 0
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b)
				in := inbox.New(inbox.Config{Dir: e.l.Inbox(), RejectedDir: e.l.InboxRejected(), Clock: e.clk})
				s := sentinel.NewWith(sentinel.Options{Layout: e.l, Clock: e.clk, Events: e.em, Store: e.st, Host: "test-host", Log: logging.Discard()}, in)
				// As in production: the notifier runs and producers
				// publish by rename, so every file is taken at once.
				ctx, cancel := context.WithCancel(b.Context())
				if err := s.Start(ctx); err != nil {
					b.Fatal(err)
				}
				benchInbox(b, e, s, "bench", n)
				b.StartTimer()
				start, c0 := time.Now(), proctree.SelfCPU()
				if err := s.Tick(b.Context()); err != nil {
					b.Fatal(err)
				}
				tick += time.Since(start)
				cpu += proctree.SelfCPU() - c0
				b.StopTimer()
				if got := len(e.pending()); got != n {
					b.Fatalf("queued %d, want %d", got, n)
				}
				cancel()
				iters++
				b.StartTimer()
			}
			events := float64(iters * n)
			b.ReportMetric(float64(tick.Nanoseconds())/events/1e3, "µs/event")
			b.ReportMetric(float64(cpu.Nanoseconds())/events/1e3, "cpu-µs/event")
		})
	}
}

// benchInbox publishes n inbox files by rename (ids evt-<tag>-<i>) and
// waits until the notifier has seen them all.
func benchInbox(b *testing.B, e *env, s *sentinel.Sentinel, tag string, n int) {
	b.Helper()
	for i := range n {
		name := fmt.Sprintf("%s%04d.json", tag, i)
		tmp := filepath.Join(e.l.Inbox(), "."+name+".tmp")
		data := fmt.Sprintf(`{"id":"evt-%s-%d","type":"demo.hello","payload":{"n":%d}}`, tag, i, i)
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
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
