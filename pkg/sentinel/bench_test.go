package sentinel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
)

// BenchmarkInboxTick measures one tick admitting n inbox files (read,
// validate, dedupe check, group-committed queue write, seen marker,
// event.detected, delete): reported per event.
func BenchmarkInboxTick(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b)
				in := inbox.New(inbox.Config{Dir: e.l.Inbox(), RejectedDir: e.l.InboxRejected(), Clock: e.clk})
				s := sentinel.NewWith(sentinel.Options{Layout: e.l, Clock: e.clk, Events: e.em, Log: logging.Discard()}, in)
				old := t0.Add(-time.Minute)
				for i := range n {
					p := filepath.Join(e.l.Inbox(), fmt.Sprintf("f%04d.json", i))
					os.WriteFile(p, []byte(fmt.Sprintf(`{"id":"evt-bench-%d","type":"demo.hello","payload":{"n":%d}}`, i, i)), 0o600)
					os.Chtimes(p, old, old)
				}
				b.StartTimer()
				if err := s.Tick(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if got := len(e.pending()); got != n {
					b.Fatalf("queued %d, want %d", got, n)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1e3, "µs/event")
		})
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
