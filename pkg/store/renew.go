package store

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// KeepRenewed renews l every every (RenewEvery when 0) until ctx ends or l
// is lost, on a timer of its own: a holder that is idle between its rounds
// of work must not look stalled to a standby, which may depose a lease not
// renewed for store.leader_stall_seconds (SPEC §12.2). While stalled
// reports true (nil: never) a renewal is skipped: that holder is stuck,
// and a standby may take the lease over. A process that is frozen renews
// nothing either, its timers being frozen with it. A failing renewal is
// logged once, and so is its recovery; so are a pause for a stall and its
// end. It blocks: run it on a goroutine of its own.
//
//	var work store.RunClock // Begin/End around each round
//	go store.KeepRenewed(ctx, lease, 0, func() bool { return work.Past(stall) }, log)
func KeepRenewed(ctx context.Context, l Lease, every time.Duration, stalled func() bool, log *slog.Logger) {
	if every <= 0 {
		every = RenewEvery
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing, paused := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.Lost():
			return
		case <-t.C:
		}
		if stalled != nil && stalled() {
			if !paused {
				paused = true
				log.Warn("lease renewals paused: the work in hand has run past store.leader_stall_seconds", "lease", l.Name(), "epoch", l.Epoch())
			}
			continue
		}
		if paused {
			paused = false
			log.Info("lease renewals resumed", "lease", l.Name(), "epoch", l.Epoch())
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			log.Warn("renew the lease", "lease", l.Name(), "err", err)
		case err == nil && failing:
			failing = false
			log.Info("lease renewed again", "lease", l.Name())
		}
	}
}

// RunClock is when the round of work now running began (a tick), for
// KeepRenewed's stalled: safe for concurrent use, zero between rounds. It
// reads the monotonic clock, so a step of the wall clock stalls nothing.
type RunClock struct{ since atomic.Int64 } // clockBase offset + 1; 0 between rounds

var clockBase = time.Now()

// Begin marks a round's start.
func (c *RunClock) Begin() { c.since.Store(int64(time.Since(clockBase)) + 1) }

// End marks its end.
func (c *RunClock) End() { c.since.Store(0) }

// Running is how long the current round has run (0 between rounds).
func (c *RunClock) Running() time.Duration {
	s := c.since.Load()
	if s == 0 {
		return 0
	}
	return time.Since(clockBase) - time.Duration(s-1)
}

// Past reports whether the current round has run for limit or more
// (never when limit is 0 or less).
func (c *RunClock) Past(limit time.Duration) bool {
	return limit > 0 && c.Running() >= limit
}
