package chamberlain

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
)

// gateMetrics is fixedMetrics whose Sample (the start of each tick) can be
// held until the test lets it go.
type gateMetrics struct {
	*fixedMetrics
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateMetrics) Sample(ctx context.Context) (Sample, error) {
	if g.held.Load() {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return g.fixedMetrics.Sample(ctx)
}

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

// clusterRole is a daemon chamberlain on a renewStore with a short
// leader_stall and fast renewals.
func clusterRole(t *testing.T, stall time.Duration) (*env, *Role, *storetest.RenewStore, *gateMetrics) {
	e := newEnv(t, time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC))
	e.cfg.LeaderStall = stall
	rs := &storetest.RenewStore{Store: e.st}
	gm := &gateMetrics{fixedMetrics: e.met, entered: make(chan struct{}), release: make(chan struct{})}
	r := e.roleWith(ModeDaemon, Deps{Clock: e.clk, Metrics: gm, Tmux: e.tm, Events: e.em, Store: rs, Host: "test-host"})
	r.renewEvery = 2 * time.Millisecond
	return e, r, rs, gm
}

// The cluster lease is renewed between ticks: the chamberlain ticks every
// monitoring.interval_seconds (30 s by default) and leader_stall_seconds
// may be 10, so a lease renewed only inside a tick looked stalled at every
// idle gap and the cluster duties moved to another host each time.
func TestCluster_LeaseRenewedAcrossAnIdleGapLongerThanTheStall(t *testing.T) {
	const stall = 50 * time.Millisecond
	e, r, rs, _ := clusterRole(t, stall)
	e.tick(r)
	leases := rs.Taken()
	if len(leases) != 1 || r.lease == nil {
		t.Fatalf("cluster lease not taken by the first tick (%d taken)", len(leases))
	}
	l := leases[0]
	idleFrom := time.Now()
	// No tick runs now. A renewal made after the gap passed the stall
	// shows the lease is kept fresh by no tick at all.
	waitUntil(t, "a renewal after an idle gap longer than leader_stall", func() bool {
		return time.Unix(0, l.Last.Load()).Sub(idleFrom) > stall
	})
	t.Logf("%d renewals over an idle gap of %s (leader_stall %s)", l.Renews.Load(), time.Since(idleFrom).Round(time.Millisecond), stall)
	select {
	case <-l.Lost():
		t.Fatal("the cluster lease was lost while idle")
	default:
	}
	e.tick(r)
	if got := rs.Taken(); len(got) != 1 || r.lease != l {
		t.Fatalf("the next tick took a new lease (%d taken): the held one should have been kept", len(got))
	}

	// Given up (the role stops), it is renewed no more: Close ends the
	// renewals before releasing.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.stopRenew != nil {
		t.Error("Close left the renewals running")
	}
}

// A tick stuck past leader_stall renews nothing (another host may take
// the cluster duties over); once it ends the renewals resume.
func TestCluster_StuckTickStopsRenewals(t *testing.T) {
	const stall = 50 * time.Millisecond
	e, r, rs, gm := clusterRole(t, stall)
	var skips, atStall atomic.Int64
	var held atomic.Pointer[storetest.RenewLease]
	stalled := r.stalled
	r.stalled = func() bool {
		if !stalled() {
			return false
		}
		// Counted only for the tick the test holds (any tick slower than
		// the stall is stalled, and skipped, too).
		if l := held.Load(); l != nil && gm.held.Load() && skips.Add(1) == 1 {
			atStall.Store(l.Renews.Load())
		}
		return true
	}
	e.tick(r)
	l := rs.Taken()[0]
	held.Store(l)
	waitUntil(t, "a renewal", func() bool { return l.Renews.Load() >= 1 })

	gm.held.Store(true)
	done := make(chan error, 1)
	go func() { done <- r.Tick(context.Background()) }()
	<-gm.entered
	// The renewals ask stalled before each renewal, on their own
	// goroutine: five rounds skipped in a row, and no renewal among them.
	waitUntil(t, "five renewal rounds skipped by a stuck tick", func() bool { return skips.Load() >= 5 })
	if got, at := l.Renews.Load(), atStall.Load(); got != at {
		t.Fatalf("the lease was renewed while the tick was stuck past leader_stall: %d renewals at the first skip, %d after five", at, got)
	}
	gm.held.Store(false)
	close(gm.release)
	if err := <-done; err != nil {
		t.Fatalf("stuck tick: %v", err)
	}
	waitUntil(t, "renewals resumed after the tick ended", func() bool { return l.Renews.Load() > atStall.Load() })
}
