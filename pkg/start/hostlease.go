package start

import (
	"context"
	"log/slog"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// maxRenewEvery bounds how often start renews this host: often enough
// that a missed renewal or two never comes near self_fence_seconds.
const maxRenewEvery = 30 * time.Second

// RenewEvery is how often start renews this host in the hosts registry:
// every 30 s, or five times per self-fence window when that is shorter.
func RenewEvery(selfFence time.Duration) time.Duration {
	return min(maxRenewEvery, selfFence/5)
}

// RenewHost returns Options.Renew: it renews host (running version since
// started) in st's hosts registry (on one machine a renewal that always
// succeeds).
func RenewHost(st store.Store, host, version string, started time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		return st.RenewHost(ctx, host, version, started)
	}
}

// hostLease keeps this host's lease (SPEC §11.7 "Host loss"): it renews
// the registry row and, after each success, touches layout.HostLease,
// whose mtime tells the generals when the last renewal succeeded (a host
// cut off from its store for self_fence_seconds stops claiming and kills
// its soldiers). Failures are logged once per change.
type hostLease struct {
	renew   func(context.Context) error
	path    string
	every   time.Duration
	log     *slog.Logger
	failing bool
	ok      bool // a renewal has succeeded since start
}

func newHostLease(o Options, selfFence time.Duration) *hostLease {
	return &hostLease{renew: o.Renew, path: o.Layout.HostLease(), every: RenewEvery(selfFence), log: o.Log}
}

// step renews once, within one renewal period.
func (h *hostLease) step(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, h.every)
	err := h.renew(rctx)
	cancel()
	if err == nil {
		err = atomicfile.Touch(h.path)
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down
		}
		if !h.failing {
			h.failing = true
			h.log.Error("host lease: renewal failed; retrying (past store.self_fence_seconds without one, this host's generals stop claiming and kill their soldiers)",
				"err", err, "every", h.every, "cat", "ALERT")
		}
		return err
	}
	switch {
	case h.failing:
		h.failing = false
		h.log.Info("host lease: renewed again", "cat", "RECOVERY")
	case !h.ok:
		h.log.Info("host lease: renewed", "every", h.every, "cat", "SYSTEM")
	}
	h.ok = true
	return nil
}

// run renews every period until ctx ends.
func (h *hostLease) run(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.step(ctx)
		}
	}
}
