package general

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// The general's duties as one host among others (SPEC §11.7), the same
// over either store: results accepted only from the claim's holder, and the
// self-fence of a host that lost its lease. On files there is one host, so
// its claims are only ever lost to a later attempt of the same task.

// errLost: this host and attempt no longer hold the task's claim (the king
// failed it HostLost and another host may run it); nothing of the attempt
// may be written.
var errLost = errors.New("claim lost")

// publish writes an attempt's checkpoint (cp, for a question) and its final
// result, setting final.CheckpointPath when there is a checkpoint: both in
// one store transaction that also releases this host's claim on the
// attempt (store.Tx.Finish). A host that lost the claim writes nothing
// (errLost), so it can never overwrite the result of the attempt that runs
// elsewhere now. The write outlives a shutdown of ctx (bounded by
// store.call_timeout_seconds): a finished attempt's result is not dropped.
func (g *General) publish(ctx context.Context, t *doc.Task, cp *doc.Checkpoint, final *doc.Result) error {
	var cb []byte
	if cp != nil {
		b, err := kv.EncodeJSON(cp)
		if err != nil {
			return fmt.Errorf("encode checkpoint of %s: %w", t.ID, err)
		}
		cb, final.CheckpointPath = b, g.o.Layout.ResultCheckpoint(t.ID)
	}
	// Every string value of the result passes through the one redactor
	// (SPEC §10.14): final results quote what agents and engines said.
	fb, err := kv.EncodeJSON(final)
	if err != nil {
		return err
	}
	fb = redact.JSON(fb)
	ctx, cancel := g.callCtx(context.WithoutCancel(ctx))
	defer cancel()
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
//
// The attempt's files and workspace are named by the task, not the
// attempt: a newer attempt this host claimed since would lose them too. A
// general never claims a task one of its goroutines still works on
// (claim), and lost looks at the claim once more before it removes
// anything: when this host holds a newer attempt of the task (another
// general process of this name claimed it), its files stay.
func (g *General) lost(ctx context.Context, t *doc.Task, ws workspace, err error) {
	l := g.o.Layout
	g.log.Warn("task lost to another host; its result is dropped", "task", t.ID, "attempt", t.RetryCount, "err", err)
	g.emit("general.claim_lost", map[string]any{"task_id": t.ID, "general": g.name, "host": g.o.Host, "retry_count": t.RetryCount})
	if g.newerAttemptHere(ctx, t) {
		g.log.Warn("a newer attempt of the lost task runs on this host; its files are kept", "task", t.ID, "attempt", t.RetryCount)
		g.written(t.ID)
		return
	}
	for _, p := range l.AttemptFiles(t.ID) {
		_ = os.Remove(p)
	}
	g.written(t.ID)
	if !ws.Borrowed {
		g.removeWorkspace(context.WithoutCancel(ctx), ws)
	}
}

// newerAttemptHere reports whether this host holds the claim of another
// attempt of t than t's own (or the store did not answer: nothing is
// removed then either).
func (g *General) newerAttemptHere(ctx context.Context, t *doc.Task) bool {
	ctx, cancel := g.callCtx(context.WithoutCancel(ctx))
	defer cancel()
	d, err := g.o.Store.Get(ctx, layout.QTasks, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	return d.State == layout.InProgress && d.Claim.Holder == g.o.Host && d.Claim.Attempt != t.RetryCount
}

// selfFence reports whether this host must not claim: start touches
// Layout.HostLease at each successful renewal of the host's lease (in
// both modes); once that is store.self_fence_seconds old the host may be
// cut off while the others already count it lost, so it claims nothing
// and kills its soldiers (the king fails their tasks HostLost after
// takeover_seconds, and they run elsewhere). Checked every second by
// Start's timer and first in every tick, before any store call; the change
// is logged once each way.
func (g *General) selfFence(ctx context.Context) bool {
	g.fenceMu.Lock()
	defer g.fenceMu.Unlock()
	fenced := g.leaseStale()
	changed := fenced != g.fenced
	g.fenced = fenced
	if changed && !fenced {
		g.log.Info("host lease renewed again; claiming", "host", g.o.Host)
		g.emit("general.unfenced", map[string]any{"general": g.name, "host": g.o.Host})
	}
	if !fenced {
		return false
	}
	if changed {
		g.log.Error("host lease not renewed; claiming nothing and killing this general's soldiers",
			"host", g.o.Host, "lease_file", g.o.Layout.HostLease(), "self_fence_seconds", g.o.System.Store.SelfFenceSeconds)
	}
	// The kills first: a cut-off host's event log may not answer.
	msg := fmt.Sprintf("host %s could not renew its lease for %ds: soldier killed", g.o.Host, g.o.System.Store.SelfFenceSeconds)
	// Every kill before any event: each event-log write of a host cut off
	// from its store may wait out the call timeout, and the soldiers must
	// be dead before takeover_seconds (SPEC §12.2).
	type kill struct {
		s soldier
		r doc.RawResult
	}
	var killed []kill
	for _, s := range g.soldiers() {
		r := syntheticRaw(s.t.ID, doc.ResultKilled, doc.ReasonHostLost, msg)
		if g.killSoldier(ctx, s, r) {
			killed = append(killed, kill{s, r})
		}
	}
	for _, k := range killed {
		g.emitKilled(k.s, k.r)
	}
	if changed {
		g.emit("general.fenced", map[string]any{"general": g.name, "host": g.o.Host})
	}
	return true
}
