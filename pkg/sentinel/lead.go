package sentinel

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// PollersLease is the store leadership the GitHub and Jira pollers run
// under (SPEC §11.7): every host runs a sentinel for its own inbox, but
// one host at a time polls the shared sources (on one machine the lease is
// the flock of state/sentinel-pollers/leader.lock).
//
// The poller state files (the GitHub ETag and Last-Modified, Jira's last
// look) stay per host: a new leader starts from its own, possibly stale or
// empty, state and re-reads from the start. That costs a fuller first
// fetch, never a duplicate: the seen index is shared, so every event the
// previous leader admitted is refused as a duplicate.
const PollersLease = "sentinel-pollers"

// pollers holds the pollers' lease between ticks, renewed every every on
// a timer of its own (the sentinel may tick only every 10 s, as long as
// the shortest store.leader_stall_seconds) unless the tick now running
// (ticking) has run for stall: that host is stuck, and another may take
// the polling over.
type pollers struct {
	st    store.Store
	log   *slog.Logger
	every time.Duration
	// stalled is ticking.Past(stall) (a test may wrap it).
	stalled func() bool
	ticking store.RunClock

	mu        sync.Mutex
	lease     store.Lease
	stopRenew context.CancelFunc // ends the lease's renewals
}

func newPollers(st store.Store, log *slog.Logger, stall time.Duration) *pollers {
	p := &pollers{st: st, log: log, every: store.RenewEvery}
	p.stalled = func() bool { return p.ticking.Past(stall) }
	return p
}

// lead returns the context the pollers run under this tick, or ok false
// when another host holds the lease (or it cannot be asked: the pollers
// wait for the next tick). The lease is kept while held; the context ends
// the moment it is lost, so a poll in flight stops at once. The caller
// calls done when the pollers finished.
func (p *pollers) lead(ctx context.Context) (pctx context.Context, done func(), ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease != nil {
		select {
		case <-p.lease.Lost():
			p.log.Warn("pollers' lease lost: polling stops here", "epoch", p.lease.Epoch())
			p.stopRenewing()
			p.lease.Release()
			p.lease = nil
		default:
		}
	}
	if p.lease == nil {
		l, err := p.st.Lead(ctx, PollersLease)
		if errors.Is(err, store.ErrHeld) {
			return nil, nil, false, nil
		}
		if err != nil {
			return nil, nil, false, err
		}
		p.lease = l
		p.log.Info("pollers' lease taken: this host polls GitHub and Jira", "epoch", l.Epoch())
		// A lease that stops being renewed is deposed by another host
		// after store.leader_stall_seconds: renewed on a timer of its own.
		// It outlives this tick (not its cancel), until the lease goes.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p.stopRenew = cancel
		go store.KeepRenewed(rctx, l, p.every, p.stalled, p.log)
	}
	lost := p.lease.Lost()
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lost:
			cancel()
		case <-pctx.Done():
		}
	}()
	return pctx, cancel, true, nil
}

// release gives the lease up (shutdown).
func (p *pollers) release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopRenewing()
	if p.lease == nil {
		return nil
	}
	err := p.lease.Release()
	p.lease = nil
	return err
}

// stopRenewing ends the lease's renewals (p.mu held).
func (p *pollers) stopRenewing() {
	if p.stopRenew != nil {
		p.stopRenew()
		p.stopRenew = nil
	}
}
