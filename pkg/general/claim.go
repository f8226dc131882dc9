package general

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/hosts"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// What a claim waits for besides a free local slot (SPEC §11.7, §12.2):
// this host's own health, a lease that is not stale, and the manifest's
// max_concurrent counted across every host.

// hostHealth is this host's admission as the king judges it (SPEC §4.4,
// §9.18), from this host's own state/resources.json: the health level,
// raised to orange when the file is stale or broken (pkg/health). Each
// host's generals claim only while their own host admits (§12.2), whatever
// the leader's host says; the token status is the king's (the budget is
// the cluster's). The change of what the host admits is logged once each
// way.
func (g *General) hostHealth() health.Snapshot {
	snap, err := health.Read(g.o.Layout.Resources(), g.o.Clock.Now())
	if err != nil {
		g.log.Warn("resources.json unreadable; claiming as orange", "err", err)
	}
	admits := "all"
	switch {
	case health.DenyReason(snap.Health, health.TokenUnknown, doc.PriorityHigh) != "":
		admits = "nothing"
	case health.DenyReason(snap.Health, health.TokenUnknown, doc.PriorityNormal) != "":
		admits = "only high priority"
	}
	g.mu.Lock()
	was := g.admits
	g.admits = admits
	g.mu.Unlock()
	if was != admits && (was != "" || admits != "all") {
		if admits == "all" {
			g.log.Info("this host's health admits again; claiming", "host", g.o.Host, "health", snap.Health, "reason", snap.Reason)
		} else {
			g.log.Warn("this host's health admits "+admits+"; claiming accordingly", "host", g.o.Host, "health", snap.Health, "reason", snap.Reason)
		}
	}
	return snap
}

// hostAdmits reports whether this host's health admits a task of priority.
func hostAdmits(snap health.Snapshot, priority string) bool {
	return health.DenyReason(snap.Health, health.TokenUnknown, priority) == ""
}

// leaseStale reports whether this host's lease is past self_fence_seconds
// now (selfFence's test, without its kills): looked at again before every
// claim, so a fence that begins in the middle of a tick claims nothing more.
func (g *General) leaseStale() bool {
	var last time.Time // no renewal seen: fenced
	if fi, err := os.Stat(g.o.Layout.HostLease()); err == nil {
		last = fi.ModTime()
	}
	return hosts.SelfFence(last, g.o.Clock.Now(), g.o.System.Store.SelfFence())
}

// nsCaps is the key-value namespace whose keys (one per general) serialise
// the cap check of that general's claims on every host. Nothing is ever
// written under it: Tx.ValueForUpdate only locks the key.
const nsCaps = "caps"

// errAtCap: the claim was given back, as the general's max_concurrent
// attempts already run across the cluster.
var errAtCap = errors.New("max_concurrent reached across the cluster")

// claimTask claims t for this host within the manifest's max_concurrent,
// counted across every host (SPEC §11.7 Caps). The claim comes first (of
// concurrent claimants of t one wins); then, one claimant of this general
// at a time anywhere (the cap key's lock), the claimed attempts are
// counted, this one included, and a claim beyond the cap is given back to
// pending in the same transaction. Every check sees every claim made
// before it and every give-back of the checks before it, so the attempts
// that passed a check never number more than the cap.
func (g *General) claimTask(ctx context.Context, t *doc.Task) error {
	c := g.claimOf(t)
	cctx, cancel := g.callCtx(ctx)
	defer cancel()
	if err := g.o.Store.Claim(cctx, layout.QTasks, layout.Pending, layout.InProgress, t.ID, c); err != nil {
		return err
	}
	over := false
	err := g.o.Store.Update(cctx, func(tx store.Tx) error {
		over = false
		if _, err := tx.ValueForUpdate(nsCaps, g.name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		n, err := g.claimedAttempts(cctx)
		if err != nil {
			return err
		}
		if n <= g.o.Manifest.MaxConcurrent {
			return nil
		}
		over = true
		return tx.Finish(layout.QTasks, layout.InProgress, layout.Pending, t.ID, c)
	})
	if err != nil {
		// Unknown whether the cap has room: give the claim back.
		rctx, cancel := g.callCtx(context.WithoutCancel(ctx))
		defer cancel()
		if rerr := g.o.Store.Update(rctx, func(tx store.Tx) error {
			return tx.Finish(layout.QTasks, layout.InProgress, layout.Pending, t.ID, c)
		}); rerr != nil && !errors.Is(rerr, store.ErrFenced) {
			// Still claimed with no goroutine: the next tick's reconcile
			// pass settles it (§9.4).
			g.log.Warn("claim not given back after a failed cap check", "task", t.ID, "err", rerr)
			g.reconciled = false
		}
		return fmt.Errorf("cap check of %s: %w", t.ID, err)
	}
	if over {
		return errAtCap
	}
	return nil
}

// claimedAttempts counts this general's attempts claimed on any host:
// in-progress tasks addressed to it whose claim is held (a published
// attempt's claim is released; a task the king re-queues is not running).
func (g *General) claimedAttempts(ctx context.Context) (int, error) {
	docs, err := g.o.Store.List(ctx, layout.QTasks, layout.InProgress)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range docs {
		var head struct {
			TargetGeneral string `json:"target_general"`
			Status        string `json:"status"`
		}
		if json.Unmarshal(d.Data, &head) != nil || head.TargetGeneral != g.name || head.Status == doc.TaskRetrying {
			continue
		}
		if d.Claim.Holder == "" {
			// A store may list documents without their claim.
			if d, err = g.o.Store.Get(ctx, layout.QTasks, d.ID); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				return 0, err
			}
			if d.State != layout.InProgress {
				continue
			}
		}
		if d.Claim.Holder != "" {
			n++
		}
	}
	return n, nil
}
