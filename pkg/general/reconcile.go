package general

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// reconcile settles the tasks a previous instance left in in_progress/
// (§9.4): (b) a final result for the current attempt → nothing to do (its
// publish released the claim: claimHeld); (a) a raw result → finish it; (c) a live registered soldier → watch it
// again; (d) otherwise → killed/SoldierDied, so the king's retry policy
// applies.
func (g *General) reconcile(ctx context.Context) error {
	entries, err := g.tasks.List(layout.InProgress)
	if err != nil {
		return err
	}
	regs, err := g.reg.List()
	if err != nil {
		g.log.Warn("read sessions registry", "err", err)
	}
	l := g.o.Layout
	for _, e := range entries {
		t, err := schema.DecodeTask(e.Data)
		if err != nil || t.TargetGeneral != g.name || t.Status == doc.TaskRetrying {
			continue // not ours, or the king is re-queueing it
		}
		if g.busy(t.ID) {
			continue // a stranded task is retried every tick
		}
		if g.claimHeld(ctx, t) != nil {
			continue // another host's attempt, or (b) one whose result is in
		}
		ws := g.workspaceOf(t)
		var reg *sessions.Entry
		for i := range regs {
			if regs[i].TaskID == t.ID && regs[i].General == g.name {
				reg = &regs[i]
			}
		}
		started := g.o.Clock.Now()
		adopted := false
		if reg == nil {
			// The registry lost the soldier (truncated, rewritten without
			// it): the soldier id the task's soldier recorded itself is
			// the truth. A live soldier of an in-progress task is never
			// declared dead for what sessions.json says.
			if sid := readTrim(l.ResultSoldierID(t.ID)); ids.Valid(sid) && strings.HasPrefix(sid, "soldier-") {
				reg = &sessions.Entry{ID: sid, TaskID: t.ID, General: g.name, StartedAt: started.UTC()}
				if fi, err := os.Stat(l.ResultSoldierID(t.ID)); err == nil {
					reg.StartedAt = fi.ModTime().UTC()
				}
				adopted = true
			}
		}
		sid := ""
		if reg != nil {
			started, sid = reg.StartedAt, reg.ID
		}
		live := false
		if reg != nil && !exists(l.ResultRaw(t.ID)) {
			ok, err := g.o.Tmux.Has(ctx, reg.ID)
			if err != nil {
				// tmux did not answer: decide nothing now (a live soldier
				// must not be declared dead); the pass runs again.
				return fmt.Errorf("check soldier %s of %s: %w", reg.ID, t.ID, err)
			}
			live = ok
		}
		switch {
		case exists(l.ResultRaw(t.ID)): // (a)
			g.log.Info("finishing a task left with a result", "task", t.ID)
		case live: // (c)
			g.log.Info("re-attaching a live soldier", "task", t.ID, "soldier", reg.ID)
			if adopted {
				if err := g.reg.Add(*reg); err != nil {
					g.log.Warn("re-register soldier", "soldier", reg.ID, "err", err)
				}
			}
			g.start(ctx, t, func(ctx context.Context) {
				if g.watch(ctx, t, sid, started, proctree.Identity{}, ws.RepoDir) {
					g.finish(ctx, t, sid, started, ws)
				}
			})
			continue
		default: // (d)
			g.log.Warn("task orphaned by a dead general; marking its soldier dead", "task", t.ID)
			g.synthetic(t.ID, doc.ResultKilled, doc.ReasonSoldierDied, "general restarted and found no live soldier for the task")
			g.emit("soldier.killed", map[string]any{"task_id": t.ID, "soldier_id": sid, "general": g.name, "reason": "orphaned"})
		}
		// (a) and (d): the soldier is deregistered, the raw result finished.
		if reg != nil {
			_ = g.reg.Remove(reg.ID)
		}
		g.start(ctx, t, func(ctx context.Context) { g.finish(ctx, t, sid, started, ws) })
	}
	return nil
}
