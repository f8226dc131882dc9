package start

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
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

// Host is this host as start keeps it in the store (Options.Host).
type Host struct {
	ID      string
	Version string
	Started time.Time
	// Open opens start's own store for the host's lease and registry row
	// with the secrets as they are now (store/open.Store of system.yaml
	// store). start reopens it, closing the old one, when kingdom.env
	// changes: a DSN fixed there reaches the lease without a restart.
	Open func(ctx context.Context) (store.Store, error)
	// Reload re-applies kingdom.env to start's environment when it
	// changed (ReloadSecrets); nil re-applies nothing.
	Reload func() error
}

// HostLeaseName is the store lease start holds for its life: one live
// host per host id.
func HostLeaseName(id string) string { return "host-" + id }

// HostHeldError: another live host holds this host id's lease.
type HostHeldError struct {
	ID, Holder string
	Since      time.Time // zero: unknown
}

func (e *HostHeldError) Error() string {
	since := "a time the store does not know"
	if !e.Since.IsZero() {
		since = e.Since.UTC().Format(time.RFC3339)
	}
	holder := e.Holder
	if holder == "" {
		holder = e.ID
	}
	return fmt.Sprintf("host id %q is live on another host: lease %s held by %s since %s; two hosts must never share a host id "+
		"(set KINGDOM_HOST_ID or system.yaml store.host_id on this one, or stop the other)", e.ID, HostLeaseName(e.ID), holder, since)
}

func (e *HostHeldError) Unwrap() error { return store.ErrHeld }

// hostLease keeps this host alive in the store (SPEC §11.7 "Host loss",
// §12.2): it renews the registry row and the lease "host-<id>" and, after
// each renewal, touches layout.HostLease, whose mtime tells the generals
// when the last renewal succeeded (a host cut off from its store for
// self_fence_seconds stops claiming and kills its soldiers). A lease lost
// (the database blinked) is taken again at the next step; one that
// another host holds before this start ever held it is a HostHeldError.
// Failures are logged once per change.
type hostLease struct {
	h       Host
	path    string
	every   time.Duration
	log     *slog.Logger
	cur     store.Store // start's own store, opened by Host.Open
	lease   store.Lease
	held    bool        // the lease was held once
	reopen  atomic.Bool // kingdom.env changed: reopen the store
	kick    chan struct{}
	failing bool
	ok      bool // a renewal has succeeded since start
	stolen  bool // a re-take found the lease held (logged)
}

func newHostLease(o Options, selfFence time.Duration) *hostLease {
	return &hostLease{h: o.Host, path: o.Layout.HostLease(), every: RenewEvery(selfFence), log: o.Log, kick: make(chan struct{}, 1)}
}

// step renews once, within one renewal period. A HostHeldError means
// this host id is another live host's.
func (h *hostLease) step(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, h.every)
	err := h.renew(rctx)
	cancel()
	var held *HostHeldError
	if errors.As(err, &held) {
		return err
	}
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

func (h *hostLease) renew(ctx context.Context) error {
	if h.reopen.Swap(false) && h.cur != nil {
		h.log.Info("kingdom.env changed: reconnecting start's store", "cat", "SYSTEM")
		h.close()
	}
	if h.cur == nil {
		st, err := h.h.Open(ctx)
		if err != nil {
			return fmt.Errorf("open the store: %w", err)
		}
		h.cur = st
	}
	if err := h.cur.RenewHost(ctx, h.h.ID, h.h.Version, h.h.Started); err != nil {
		return err
	}
	return h.keepLease(ctx)
}

// keepLease holds the lease host-<id>: renewed while held (a holder that
// stops renewing may be deposed), taken again once lost.
func (h *hostLease) keepLease(ctx context.Context) error {
	if h.lease != nil {
		select {
		case <-h.lease.Lost():
			h.lease = nil
			h.log.Warn("host lease: lease "+HostLeaseName(h.h.ID)+" lost (the store's session ended); taking it again", "cat", "RECOVERY")
		default:
			return h.lease.Renew(ctx)
		}
	}
	l, err := h.cur.Lead(ctx, HostLeaseName(h.h.ID))
	if errors.Is(err, store.ErrHeld) {
		he := &HostHeldError{ID: h.h.ID}
		if ls, lerr := h.cur.Leaders(ctx); lerr == nil {
			he.Holder, he.Since = ls[HostLeaseName(h.h.ID)].Holder, ls[HostLeaseName(h.h.ID)].Since
		}
		if !h.held {
			return he
		}
		// Held once: most likely this start's own old session, not yet
		// ended by the server. The roles go on; the lease is asked for
		// again at every step.
		if !h.stolen {
			h.stolen = true
			h.log.Error("host lease: cannot take the lease back; retrying", "err", he, "cat", "ALERT")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("take lease %s: %w", HostLeaseName(h.h.ID), err)
	}
	if h.stolen {
		h.stolen = false
		h.log.Info("host lease: lease "+HostLeaseName(h.h.ID)+" taken back", "cat", "RECOVERY")
	}
	h.lease, h.held = l, true
	return nil
}

// reconnect asks for the store to be reopened at once (kingdom.env
// changed).
func (h *hostLease) reconnect() {
	h.reopen.Store(true)
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// close releases the lease and closes the store.
func (h *hostLease) close() {
	if h.lease != nil {
		h.lease.Release()
		h.lease = nil
	}
	if h.cur != nil {
		h.cur.Close()
		h.cur = nil
	}
}

// run renews every period (and at once when asked to reconnect) until
// ctx ends. A lease another host holds before this start held it is
// sent on fatal.
func (h *hostLease) run(ctx context.Context, fatal chan<- error) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
		var held *HostHeldError
		if err := h.step(ctx); errors.As(err, &held) {
			fatal <- err
			return
		}
	}
}

// RecordHostID writes the host id start resolved to state/start/host-id
// (config.HostIDRecord, 0600), where the roles and every operator command
// resolve it after KINGDOM_HOST_ID (config.Store.ResolveHostID): a shell
// without the unit's environment still names this host as its roles do.
func RecordHostID(l layout.Layout, id string) error {
	if err := atomicfile.WriteFile(config.HostIDRecord(l.StateDir()), []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the host id: %w", err)
	}
	return nil
}
