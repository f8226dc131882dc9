package runner_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// countingLease is a lease that counts its renewals.
type countingLease struct {
	renews atomic.Int64
	lost   chan struct{}
	once   sync.Once
}

func (l *countingLease) Name() string          { return "king" }
func (l *countingLease) Epoch() int64          { return 1 }
func (l *countingLease) Lost() <-chan struct{} { return l.lost }
func (l *countingLease) Release() error        { l.once.Do(func() { close(l.lost) }); return nil }
func (l *countingLease) Renew(context.Context) error {
	l.renews.Add(1)
	return nil
}

// An idle leader keeps renewing its lease between ticks: a king whose
// interval (king.yaml intervals, up to an hour) is longer than
// store.leader_stall_seconds must not look stalled to a standby, which
// would depose a healthy leader at every idle spell. Renewals used to ride
// on the end of each tick.
func TestRun_IdleLeaderRenewsBetweenTicks(t *testing.T) {
	lease := &countingLease{lost: make(chan struct{})}
	role := newRole()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := runner.Options{
		Role: "king", Layout: layout.New(t.TempDir()), Interval: time.Hour,
		Lead:        func(context.Context) (store.Lease, error) { return lease, nil },
		LeaderStall: time.Hour, RenewEvery: 10 * time.Millisecond,
	}
	go func() { done <- runner.Run(ctx, o, role) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, "three renewals", func() bool { return lease.renews.Load() >= 3 })
	if n := role.ticks.Load(); n != 1 {
		t.Fatalf("%d ticks, want only the first (the interval is an hour): the renewals must not come from ticks", n)
	}
}
