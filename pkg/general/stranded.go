package general

import (
	"context"
	"errors"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Writes that must not be lost. When the disk is full (or the results
// directory is otherwise unwritable) a finished attempt cannot get its
// final result, nor a dead soldier its synthetic raw result. Such a task
// is stranded: every tick retries it, so the task is finished moments
// after space comes back, from the raw result that exists (never by
// re-running its agent). While any write fails the general says so once:
// an ERROR log and the internal event general.results_unwritable, then
// general.results_writable when the last stranded task is written.

// stranded is a finished attempt whose results are not written yet.
type stranded struct {
	t       *doc.Task
	sid     string
	started time.Time
	ws      workspace
}

// strand records that t's results wait for a writable disk.
func (g *General) strand(s stranded, err error) {
	g.mu.Lock()
	g.stranded[s.t.ID] = s
	first := !g.writesFailing
	g.writesFailing = true
	n := len(g.stranded)
	g.mu.Unlock()
	if first {
		msg := redact.String(err.Error())
		g.log.Error("results cannot be written; retried every tick", "task", s.t.ID, "err", msg)
		g.emit("general.results_unwritable", map[string]any{"general": g.name, "task_id": s.t.ID, "stranded": n, "error": msg})
	}
}

// written notes that task's results are written; the last stranded task
// written ends the failing state.
func (g *General) written(task string) {
	g.mu.Lock()
	delete(g.stranded, task)
	recovered := g.writesFailing && len(g.stranded) == 0 && len(g.pendingRaw) == 0
	if recovered {
		g.writesFailing = false
	}
	g.mu.Unlock()
	if recovered {
		g.log.Info("results are written again", "task", task)
		g.emit("general.results_writable", map[string]any{"general": g.name, "task_id": task})
	}
}

// retryStranded restarts the finish of every stranded task (each in its
// own goroutine, holding a slot like any task).
func (g *General) retryStranded(ctx context.Context) {
	g.mu.Lock()
	var todo []stranded
	for id, s := range g.stranded {
		if g.active[id] == nil {
			todo = append(todo, s)
			delete(g.stranded, id)
		}
	}
	g.mu.Unlock()
	for _, s := range todo {
		g.start(ctx, s.t, func(ctx context.Context) { g.finish(ctx, s.t, s.sid, s.started, s.ws) })
	}
}

// keepPendingRaw remembers a synthetic raw result that could not be
// written, for finish to write again.
func (g *General) keepPendingRaw(r doc.RawResult) {
	g.mu.Lock()
	g.pendingRaw[r.TaskID] = r
	g.mu.Unlock()
}

// writePendingRaw writes task's remembered synthetic raw result, if any
// (no-replace: one published meanwhile wins). false: still unwritable.
func (g *General) writePendingRaw(task string) (bool, error) {
	g.mu.Lock()
	r, ok := g.pendingRaw[task]
	g.mu.Unlock()
	if !ok {
		return true, nil
	}
	b, err := kv.EncodeJSON(r)
	if err == nil {
		err = atomicfile.CreateNoReplace(g.o.Layout.ResultRaw(task), b, 0o600)
	}
	if err != nil && !errors.Is(err, atomicfile.ErrExists) {
		return false, err
	}
	g.mu.Lock()
	delete(g.pendingRaw, task)
	g.mu.Unlock()
	return true, nil
}
