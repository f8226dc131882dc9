package general

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/hosts"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// The general's PostgreSQL-mode duties (SPEC §11.7), the only code that
// asks which mode it runs in: results accepted only from the claim's
// holder, and the self-fence of a host that lost its lease. In file mode
// every function here does what the general always did.

// errLost: this host and attempt no longer hold the task's claim (the king
// failed it HostLost and another host may run it); nothing of the attempt
// may be written.
var errLost = errors.New("claim lost")

// publish writes an attempt's checkpoint (cp, for a question) and its final
// result, setting final.CheckpointPath when the checkpoint is written.
//
// With a store, both are written in one transaction that also releases
// this host's claim on the attempt (store.Tx.Finish): a host that lost the
// claim writes nothing (errLost), so it can never overwrite the result of
// the attempt that runs elsewhere now. On files the checkpoint comes first
// and, as always, a checkpoint that cannot be written only leaves the final
// result without its checkpoint_path.
func (g *General) publish(ctx context.Context, t *schema.Task, cp *schema.Checkpoint, final *schema.Result) error {
	l := g.o.Layout
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.StoreTimeout)
	defer cancel()
	if g.o.Store == nil {
		if cp != nil {
			if err := kv.PutJSON(ctx, g.kv, kv.NSCheckpoints, t.ID, cp); err != nil {
				g.log.Error("write checkpoint", "task", t.ID, "err", err)
			} else {
				final.CheckpointPath = l.ResultCheckpoint(t.ID)
			}
		}
		b, err := redactedJSON(final)
		if err != nil {
			return err
		}
		return g.kv.Put(ctx, kv.NSResults, t.ID, b)
	}
	var cb []byte
	if cp != nil {
		b, err := kv.EncodeJSON(cp)
		if err != nil {
			return fmt.Errorf("encode checkpoint of %s: %w", t.ID, err)
		}
		cb, final.CheckpointPath = b, l.ResultCheckpoint(t.ID)
	}
	fb, err := redactedJSON(final)
	if err != nil {
		return err
	}
	err = g.o.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.Finish(layout.QTasks, layout.InProgress, layout.InProgress, t.ID, g.claimOf(t)); err != nil {
			return err
		}
		if cb != nil {
			if err := tx.Set(kv.NSCheckpoints, t.ID, cb); err != nil {
				return err
			}
		}
		return tx.Set(kv.NSResults, t.ID, fb)
	})
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", errLost, err)
	}
	return err
}

// lost ends an attempt this host no longer holds: its local files and
// workspace go (a borrowed resume workdir stays: it belongs to the
// question), and no result is written for it.
func (g *General) lost(ctx context.Context, t *schema.Task, ws workspace, err error) {
	l := g.o.Layout
	g.log.Warn("task lost to another host; its result is dropped", "task", t.ID, "attempt", t.RetryCount, "err", err)
	g.emit("general.claim_lost", map[string]any{"task_id": t.ID, "general": g.name, "host": g.o.Host, "retry_count": t.RetryCount})
	for _, p := range []string{l.ResultRaw(t.ID), l.ResultStaging(t.ID), l.ResultHeartbeat(t.ID), l.ResultSoldierID(t.ID), l.ResultSpent(t.ID)} {
		_ = os.Remove(p)
	}
	g.written(t.ID)
	if !ws.Borrowed {
		g.removeWorkspace(context.WithoutCancel(ctx), ws)
	}
}

// heldElsewhere reports whether an in-progress attempt of t is not this
// host's to settle: with a store, its claim names another holder or
// attempt (or none: its result is written). On files every in-progress
// task of this general is its own.
func (g *General) heldElsewhere(t *schema.Task) bool {
	if g.o.Store == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), queue.StoreTimeout)
	defer cancel()
	d, err := g.o.Store.Get(ctx, layout.QTasks, t.ID)
	if err != nil {
		return true // gone, or the store did not answer: decide nothing now
	}
	return d.State != layout.InProgress || d.Claim != g.claimOf(t)
}

// selfFence reports whether this host must not claim: in PostgreSQL mode,
// start touches Layout.HostLease at each successful renewal of the host's
// lease; once that is store.self_fence_seconds old the host may be cut off
// while the others already count it lost, so it claims nothing and kills
// its soldiers (the king fails their tasks HostLost after
// takeover_seconds, and they run elsewhere). Checked every tick; the
// change is logged once each way.
func (g *General) selfFence(ctx context.Context) bool {
	if g.o.Store == nil {
		return false
	}
	var last time.Time // no renewal seen: fenced
	if fi, err := os.Stat(g.o.Layout.HostLease()); err == nil {
		last = fi.ModTime()
	}
	fenced := hosts.SelfFence(last, g.o.Clock.Now(), g.o.System.Store.SelfFence())
	if fenced != g.fenced {
		g.fenced = fenced
		if fenced {
			g.log.Error("host lease not renewed; claiming nothing and killing this general's soldiers",
				"host", g.o.Host, "lease_file", g.o.Layout.HostLease(), "self_fence_seconds", g.o.System.Store.SelfFenceSeconds)
			g.emit("general.fenced", map[string]any{"general": g.name, "host": g.o.Host})
		} else {
			g.log.Info("host lease renewed again; claiming", "host", g.o.Host)
			g.emit("general.unfenced", map[string]any{"general": g.name, "host": g.o.Host})
		}
	}
	if fenced {
		msg := fmt.Sprintf("host %s could not renew its lease for %ds: soldier killed", g.o.Host, g.o.System.Store.SelfFenceSeconds)
		for _, s := range g.soldiers() {
			g.stopSoldier(ctx, s, schema.ResultKilled, schema.ReasonHostLost, msg)
		}
	}
	return fenced
}
