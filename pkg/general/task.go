package general

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// Heartbeat extension rule (SPEC §4.5): past the timeout, a heartbeat
// touched within heartbeatFresh extends the deadline by heartbeatExtend, up
// to twice the timeout.
const (
	heartbeatFresh  = 30 * time.Second
	heartbeatExtend = 60 * time.Second
)

// runTask is one attempt of t, from workspace to final result.
func (g *General) runTask(ctx context.Context, t *doc.Task) {
	l := g.o.Layout
	started := g.o.Clock.Now()
	// §9.1: nothing of the previous attempt may be mistaken for this one.
	for _, p := range l.AttemptFiles(t.ID) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.log.Warn("remove previous attempt file", "path", p, "err", err)
		}
	}
	if t.SessionID != "" && t.Workdir != "" && g.resumeWorkdir(t) == "" {
		// SPEC §10.5: a resume whose working directory is gone has lost its
		// session (claude keys sessions by cwd; the repo state is gone).
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonSessionLost,
			fmt.Sprintf("cannot resume session %s: its working directory %s is gone", t.SessionID, t.Workdir))
		g.finish(ctx, t, "", started, workspace{})
		return
	}
	ws, err := g.prepareWorkspace(ctx, t)
	if err != nil {
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonEngineError, "prepare workspace: "+err.Error())
		g.finish(ctx, t, "", started, ws)
		return
	}
	prompt, err := g.BuildPrompt(t, ws)
	if err != nil {
		reason := doc.ReasonEngineError
		if errors.Is(err, ErrPromptTooLarge) {
			reason = doc.ReasonPromptTooLarge
		}
		g.synthetic(t.ID, doc.ResultFailed, reason, err.Error())
		g.finish(ctx, t, "", started, ws)
		return
	}
	if err := writeTaskFile(l.Prompt(t.ID), []byte(redact.String(prompt))); err != nil {
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonEngineError, "write prompt: "+err.Error())
		g.finish(ctx, t, "", started, ws)
		return
	}

	sid := ids.Soldier(g.o.Clock.Now())
	spawnedAt := g.o.Clock.Now()
	// §9.12: register before creating the session, deregister on failure.
	if err := g.reg.Add(sessions.Entry{ID: sid, TaskID: t.ID, General: g.name, StartedAt: spawnedAt.UTC()}); err != nil {
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonEngineError, "register soldier: "+err.Error())
		g.finish(ctx, t, "", started, ws)
		return
	}
	// An operator's cancel that arrived while the workspace was prepared
	// (a clone can take minutes) ends the attempt here: no agent may start
	// its first actions only to be killed (SPEC §10.11). A raw result
	// already there (this attempt's end was decided meanwhile) ends it too.
	if g.cancelled(ctx, t) || exists(l.ResultRaw(t.ID)) {
		_ = g.reg.Remove(sid)
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonCancelled, "cancelled before its soldier started")
		g.log.Info("task cancelled before launch", "task", t.ID)
		g.finish(ctx, t, "", started, ws)
		return
	}
	// A host fenced while the workspace was prepared starts no soldier:
	// its attempt may be another host's soon (SPEC §11.7 Host loss).
	if g.leaseStale() {
		_ = g.reg.Remove(sid)
		g.synthetic(t.ID, doc.ResultKilled, doc.ReasonHostLost,
			fmt.Sprintf("host %s could not renew its lease for %ds: soldier not started", g.o.Host, g.o.System.Store.SelfFenceSeconds))
		g.finish(ctx, t, "", started, ws)
		return
	}
	p := spawn.Params{BaseDir: l.Base, TaskID: t.ID, General: g.name, PromptFile: l.Prompt(t.ID),
		Workdir: ws.RepoDir, SoldierID: sid, Resume: t.SessionID, Engine: g.o.Manifest.Engine}
	launched, err := spawn.Launch(ctx, g.o.Tmux, g.o.SpawnBin, p, g.o.SessionEnv)
	if err != nil {
		_ = g.reg.Remove(sid)
		g.synthetic(t.ID, doc.ResultFailed, doc.ReasonEngineError, err.Error())
		g.finish(ctx, t, "", started, ws)
		return
	}
	// Who the soldier's process is, taken now: its end is then seen in
	// /proc, with no tmux call (an already finished one has no identity).
	proc, _ := proctree.Identify(launched.PID)
	g.trace(t.ID, "running")
	g.emit("soldier.spawned", map[string]any{"task_id": t.ID, "soldier_id": sid, "general": g.name, "retry_count": t.RetryCount})
	g.log.Info("soldier spawned", "task", t.ID, "soldier", sid)
	if !g.watch(ctx, t, sid, spawnedAt, proc, ws.RepoDir) {
		return // shutting down: the restarted general re-attaches (§9.4)
	}
	g.finish(ctx, t, sid, started, ws)
}

// cancelled reports whether the operator cancelled this attempt of t (the
// king's cancel record, kv.NSCancelled, §10.11).
func (g *General) cancelled(ctx context.Context, t *doc.Task) bool {
	ctx, cancel := g.callCtx(ctx)
	defer cancel()
	rec := control.ReadCancelled(ctx, g.kv, t.ID)
	return rec != nil && rec.RetryCount == t.RetryCount
}

// synthetic writes a raw result the general decided (no-replace: a result
// the soldier published first wins, §9.5). false: a raw result was there.
func (g *General) synthetic(task, status, reason, msg string) bool {
	return g.writeSynthetic(syntheticRaw(task, status, reason, msg))
}

// syntheticRaw is the raw result of a failure the general decided.
func syntheticRaw(task, status, reason, msg string) doc.RawResult {
	msg = redact.String(msg)
	return doc.RawResult{TaskID: task, Status: status, Summary: msg, Error: msg, ErrorReason: reason}
}

// writeSynthetic is synthetic for a raw result of the general's.
func (g *General) writeSynthetic(r doc.RawResult) bool {
	task := r.TaskID
	b, err := kv.EncodeJSON(r)
	if err == nil {
		err = atomicfile.CreateNoReplace(g.o.Layout.ResultRaw(task), b, 0o600)
	}
	if errors.Is(err, atomicfile.ErrExists) {
		return false
	}
	if err != nil {
		// finish writes it again, every tick until it can (stranded.go).
		g.log.Warn("write synthetic raw result", "task", task, "err", err)
		g.keepPendingRaw(r)
	}
	return true
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// watch follows soldier sid until its raw result exists (published by the
// soldier or synthesised here on death, timeout or a brake: no progress,
// burn; brakes.go). It returns false when ctx ended first.
//
// proc is the soldier's process when known (zero after a restart): a
// soldier seen to end by itself is not killed through tmux. workdir is
// the attempt's worktree (the engine's cwd).
func (g *General) watch(ctx context.Context, t *doc.Task, sid string, spawnedAt time.Time, proc proctree.Identity, workdir string) bool {
	l := g.o.Layout
	raw, hb := l.ResultRaw(t.ID), l.ResultHeartbeat(t.ID)
	timeout := g.o.Manifest.Timeout()
	deadline, hardCap := spawnedAt.Add(timeout), spawnedAt.Add(2*timeout)
	var lastMtime, lastBeat time.Time
	brk := newBrakes(g.o.Breaker, workdir, l.ResultSpent(t.ID), g.o.Clock.Now())
	tick := time.NewTicker(g.o.PollInterval)
	defer tick.Stop()
	published, unsubscribe := g.subscribeRaw(ctx, t.ID)
	defer unsubscribe()
	for first := true; ; first = false {
		if exists(raw) {
			break
		}
		// The session was created a moment ago: the first look at its
		// liveness waits for the first poll (one tmux process per task
		// fewer; a fast soldier's result usually wakes us before).
		alive, err := true, error(nil)
		switch {
		case first:
		case proc.PID != 0:
			// The session lives exactly as long as its process: /proc
			// answers without a tmux process per poll.
			alive = !proc.Exited()
		default:
			alive, err = g.o.Tmux.Has(ctx, sid)
		}
		if err != nil && ctx.Err() != nil {
			return false
		}
		if err == nil && !alive {
			// §9.5: the soldier may have published just before exiting.
			if !exists(raw) {
				g.synthetic(t.ID, doc.ResultKilled, doc.ReasonSoldierDied, "soldier session "+sid+" ended without a result")
				g.emit("soldier.killed", map[string]any{"task_id": t.ID, "soldier_id": sid, "general": g.name})
				g.log.Warn("soldier died without a result", "task", t.ID, "soldier", sid)
			}
			break
		}
		now := g.o.Clock.Now()
		// Heartbeat freshness is judged on our clock: we note when we saw
		// its mtime change, so clock skew and injected clocks agree.
		event := false
		if st, err := os.Stat(hb); err == nil && !st.ModTime().Equal(lastMtime) {
			lastMtime, lastBeat, event = st.ModTime(), now, true
		}
		if now.After(deadline) {
			if !lastBeat.IsZero() && now.Sub(lastBeat) <= heartbeatFresh && deadline.Before(hardCap) {
				deadline = deadline.Add(heartbeatExtend)
				if deadline.After(hardCap) {
					deadline = hardCap
				}
				g.log.Info("soldier past its timeout but alive; extended", "task", t.ID, "soldier", sid, "until", deadline.Sub(spawnedAt))
			} else {
				_ = g.o.Tmux.Kill(ctx, sid)
				msg := fmt.Sprintf("soldier %s exceeded its timeout (%s)", sid, now.Sub(spawnedAt).Round(time.Second))
				g.synthetic(t.ID, doc.ResultFailed, doc.ReasonTimeout, msg)
				g.emit("soldier.timeout", map[string]any{"task_id": t.ID, "soldier_id": sid, "general": g.name,
					"timeout_seconds": g.o.Manifest.TimeoutSeconds, "elapsed_seconds": now.Sub(spawnedAt).Seconds()})
				g.log.Warn("soldier timed out", "task", t.ID, "soldier", sid)
				break
			}
		}
		if reason, msg := brk.check(now, event); reason != "" {
			// Killed as a cancel kills; the next look sees the raw result
			// (the publication wakes it).
			r := syntheticRaw(t.ID, doc.ResultFailed, reason, "soldier "+sid+" stopped: "+msg)
			if reason == doc.ReasonRunaway {
				terminal := true
				r.Terminal = &terminal
			}
			g.log.Warn("soldier stopped by a brake", "task", t.ID, "soldier", sid, "reason", reason, "why", msg)
			g.stopSoldier(ctx, soldier{t: t, sid: sid}, r)
		}
		g.trace(t.ID, "poll")
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		case <-published:
		}
	}
	g.trace(t.ID, "raw")
	// A finished soldier's session ends by itself, just after it publishes.
	// Wait a moment for that (seen in /proc); only a soldier that is still
	// there, or one whose process is unknown, is killed through tmux, so no
	// orphan lingers; /proc answers without starting a tmux client.
	if !g.awaitExit(proc) {
		_ = g.o.Tmux.Kill(context.WithoutCancel(ctx), sid)
	}
	if err := g.reg.Remove(sid); err != nil {
		g.log.Warn("deregister soldier", "soldier", sid, "err", err)
	}
	return true
}

// soldierExitWait bounds how long a general waits for a soldier that
// published its result to end by itself (it exits right after publishing).
const soldierExitWait = 250 * time.Millisecond

// awaitExit reports whether proc ended within soldierExitWait. The general
// is not the soldier's parent (tmux is), so it waits on a pidfd
// (proctree.WaitExit), not with wait(2).
func (g *General) awaitExit(proc proctree.Identity) bool {
	if proc.PID == 0 {
		return false
	}
	return proc.WaitExit(soldierExitWait)
}

func readTrim(path string) string { return strings.TrimSpace(readOr(path, "")) }
