package general

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Cancel (SPEC §10.11, §11.7): the king only records an operator's cancel
// of an attempt; the general that owns the attempt's soldier, on the host
// that runs it, ends it. Each tick looks up the cancel record of every
// running attempt; a cancelled one gets its Cancelled raw result and loses
// its soldier's session and whole process tree, and its watcher then
// finishes it as any other attempt.

// soldier is the registered soldier of one of this general's running
// attempts.
type soldier struct {
	t   *doc.Task
	sid string
}

// soldiers lists the registered soldiers of this general's running
// attempts (an attempt still preparing its workspace has none yet; its
// launch checks the cancel record itself).
func (g *General) soldiers() []soldier {
	g.mu.Lock()
	active := maps.Clone(g.active)
	g.mu.Unlock()
	if len(active) == 0 {
		return nil
	}
	regs, err := g.reg.List()
	if err != nil {
		g.log.Warn("read sessions registry", "err", err)
	}
	var out []soldier
	for _, r := range regs {
		if t := active[r.TaskID]; t != nil && r.General == g.name {
			out = append(out, soldier{t: t, sid: r.ID})
		}
	}
	return out
}

// enforceCancels stops every running soldier whose attempt the operator
// cancelled.
func (g *General) enforceCancels(ctx context.Context) {
	for _, s := range g.soldiers() {
		rec := control.ReadCancelled(ctx, g.kv, s.t.ID)
		if rec == nil || rec.RetryCount != s.t.RetryCount {
			continue
		}
		g.stopSoldier(ctx, s, syntheticRaw(s.t.ID, doc.ResultFailed, doc.ReasonCancelled, "cancelled by "+rec.By))
	}
}

// stopSoldier ends a running soldier for a reason of the general's (a
// cancel, a self-fence, a brake): the raw result r first (no-replace; written before the kill, so the watcher
// never takes the soldier's end for a death without a result), then its
// tmux session, its process tree and what its agent detached (the sweep
// by KINGDOM_TASK_ID and KINGDOM_BASE_DIR the soldier itself does). A
// soldier whose own result got there first and is not a failure has
// finished: it is left alone.
func (g *General) stopSoldier(ctx context.Context, s soldier, r doc.RawResult) {
	if g.killSoldier(ctx, s, r) {
		g.emitKilled(s, r)
	}
}

// emitKilled records a kill killSoldier made.
func (g *General) emitKilled(s soldier, r doc.RawResult) {
	g.emit("soldier.killed", map[string]any{"task_id": s.t.ID, "soldier_id": s.sid, "general": g.name, "reason": r.ErrorReason})
}

// killSoldier is stopSoldier without its event: it touches nothing but
// this host (tmux, processes, the raw result file), so a host cut off from
// its store kills every soldier at once, before the first event-log write
// that may hang. It reports whether it killed.
func (g *General) killSoldier(ctx context.Context, s soldier, r doc.RawResult) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if alive, err := g.o.Tmux.Has(ctx, s.sid); err != nil || !alive {
		return false // gone already: its watcher settles the attempt
	}
	raw := g.o.Layout.ResultRaw(s.t.ID)
	if !g.writeSynthetic(r) {
		if st := rawStatus(raw); st == doc.ResultSuccess || st == doc.ResultSkipped || st == doc.ResultNeedsHuman {
			return false // the attempt finished before the kill
		}
	}
	var tree []proctree.Proc
	if pid, err := g.o.Tmux.PanePID(ctx, s.sid); err == nil {
		tree = proctree.Descendants(pid) // while the parents still live
	}
	if err := g.o.Tmux.Kill(ctx, s.sid); err != nil {
		g.log.Warn("kill soldier session", "task", s.t.ID, "soldier", s.sid, "err", err)
	}
	proctree.Kill(tree)
	// The kill above may beat the soldier's own sweep of what its agent
	// detached (`setsid cmd &`).
	proctree.Sweep(map[string]string{layout.EnvBase: g.o.Layout.Base, layout.EnvTaskID: s.t.ID})
	g.log.Info("soldier killed", "task", s.t.ID, "soldier", s.sid, "reason", r.ErrorReason, "processes", len(tree))
	return true
}

// rawStatus is the status of a raw result file, "" when unreadable.
func rawStatus(path string) string {
	b, err := queue.ReadLimited(path, maxRawBytes)
	if err != nil {
		return ""
	}
	var r struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.Status
}
