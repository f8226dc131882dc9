package sentinel

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// gatePoller is a poller (not the inbox) due at every tick whose Fetch
// can be held until the test lets it go.
type gatePoller struct {
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatePoller) Name() string            { return "github" }
func (g *gatePoller) Interval() time.Duration { return 0 }
func (g *gatePoller) Fetch(ctx context.Context) (*watcher.Batch, error) {
	if g.held.Load() {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return nil, nil
}
func (g *gatePoller) PostEmit(context.Context, *watcher.Batch, []watcher.Result) error { return nil }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // a deadline, not a measurement
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling another goroutine's progress
	}
}

// pollerSentinel is a sentinel running one poller on a renewStore, with a
// short leader_stall and fast renewals.
func pollerSentinel(t *testing.T, stall time.Duration) (*Sentinel, *storetest.RenewStore, *gatePoller) {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	fs, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	rs := &storetest.RenewStore{Store: fs}
	gp := &gatePoller{entered: make(chan struct{}), release: make(chan struct{})}
	s := NewWith(Options{Layout: l, Store: rs, Host: "test-host", LeaderStall: stall}, gp)
	s.pollers.every = 2 * time.Millisecond
	t.Cleanup(func() { s.Close() })
	return s, rs, gp
}

func tick(t *testing.T, s *Sentinel) {
	t.Helper()
	if err := s.Tick(context.Background()); err != nil {
		t.Fatalf("tick: %v", err)
	}
}

// The pollers' lease is renewed between ticks: renewed only inside one, a
// sentinel whose ticks are as far apart as leader_stall_seconds looked
// stalled and its polling could be taken over at every gap.
func TestPollers_LeaseRenewedAcrossAnIdleGapLongerThanTheStall(t *testing.T) {
	const stall = 50 * time.Millisecond
	s, rs, _ := pollerSentinel(t, stall)
	tick(t, s)
	leases := rs.Taken()
	if len(leases) != 1 {
		t.Fatalf("%d pollers' leases taken by the first tick, want 1", len(leases))
	}
	l := leases[0]
	idleFrom := time.Now()
	waitUntil(t, "a renewal after an idle gap longer than leader_stall", func() bool {
		return time.Unix(0, l.Last.Load()).Sub(idleFrom) > stall
	})
	t.Logf("%d renewals over an idle gap of %s (leader_stall %s)", l.Renews.Load(), time.Since(idleFrom).Round(time.Millisecond), stall)
	tick(t, s)
	if got := rs.Taken(); len(got) != 1 {
		t.Fatalf("%d leases taken after the gap: the held one should have been kept", len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.pollers.stopRenew != nil {
		t.Error("Close left the renewals running")
	}
}

// A tick stuck in a poll past leader_stall renews nothing (another host
// may take the polling over); once it ends the renewals resume.
func TestPollers_StuckTickStopsRenewals(t *testing.T) {
	const stall = 50 * time.Millisecond
	s, rs, gp := pollerSentinel(t, stall)
	var skips, atStall atomic.Int64
	var held atomic.Pointer[storetest.RenewLease]
	stalled := s.pollers.stalled
	s.pollers.stalled = func() bool {
		if !stalled() {
			return false
		}
		// Counted only for the tick the test holds.
		if l := held.Load(); l != nil && gp.held.Load() && skips.Add(1) == 1 {
			atStall.Store(l.Renews.Load())
		}
		return true
	}
	tick(t, s)
	l := rs.Taken()[0]
	held.Store(l)
	waitUntil(t, "a renewal", func() bool { return l.Renews.Load() >= 1 })

	gp.held.Store(true)
	done := make(chan error, 1)
	go func() { done <- s.Tick(context.Background()) }()
	<-gp.entered
	waitUntil(t, "five renewal rounds skipped by a stuck tick", func() bool { return skips.Load() >= 5 })
	if got, at := l.Renews.Load(), atStall.Load(); got != at {
		t.Fatalf("the lease was renewed while the tick was stuck past leader_stall: %d renewals at the first skip, %d after five", at, got)
	}
	gp.held.Store(false)
	close(gp.release)
	if err := <-done; err != nil {
		t.Fatalf("stuck tick: %v", err)
	}
	waitUntil(t, "renewals resumed after the tick ended", func() bool { return l.Renews.Load() > atStall.Load() })
}
