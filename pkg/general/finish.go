package general

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"

	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

const maxRawBytes = 1 << 20

// readRaw reads and validates the raw result; anything unacceptable becomes
// a failed/InvalidResult result.
func (g *General) readRaw(task string) *doc.RawResult {
	path := g.o.Layout.ResultRaw(task)
	b, err := queue.ReadLimited(path, maxRawBytes)
	if err != nil {
		return invalid(task, fmt.Sprintf("read raw result: %v", err))
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m) // nil unless b is a JSON object
	r, err := schema.DecodeRawResult(b)
	if err != nil {
		if fr := validFallback(m); fr != nil {
			r, err = fr, nil
		} else {
			return invalidRaw(task, m, err)
		}
	}
	if r.TaskID != task {
		return invalid(task, fmt.Sprintf("raw result names task %q", r.TaskID))
	}
	if _, ok := m[doc.RawOrigin]; ok {
		// The agent's own result (its staging file or structured output,
		// which soldier-spawn marks with doc.RawOrigin), not one the
		// soldier, the general or the king decided. Only the soldier's
		// classification of the engine's own output may say why an
		// attempt failed and when an engine is usable again (SPEC
		// §10.8): an agent's result claiming a usage limit would pause
		// the engine for everyone, and one claiming to be retryable
		// would repeat its side effects (§9.6).
		r.ErrorReason, r.ResetsAt, r.Terminal = "", "", nil
	}
	if r.ErrorReason == "" {
		switch r.Status {
		case doc.ResultFailed:
			r.ErrorReason = doc.ReasonAgentFailed
		case doc.ResultKilled:
			r.ErrorReason = doc.ReasonSoldierDied
		}
	}
	return r
}

func invalid(task, msg string) *doc.RawResult {
	return &doc.RawResult{TaskID: task, Status: doc.ResultFailed, Summary: msg, Error: msg, ErrorReason: doc.ReasonInvalidResult}
}

// finish turns the raw result into the final result (§4.5 Finish):
// validate, memory, checkpoint, final result (write-then-rename), event,
// workspace cleanup.
func (g *General) finish(ctx context.Context, t *doc.Task, sid string, started time.Time, ws workspace) {
	l := g.o.Layout
	if ok, err := g.writePendingRaw(t.ID); !ok {
		g.strand(stranded{t: t, sid: sid, started: started, ws: ws}, err)
		return
	}
	r := g.readRaw(t.ID)
	if sid == "" {
		sid = readTrim(l.ResultSoldierID(t.ID))
	}
	if r.SessionID == "" {
		r.SessionID = readTrim(l.ResultSessionID(t.ID))
	}
	if r.Usage == nil {
		// A killed attempt's raw result is its killer's (Timeout,
		// Cancelled, SoldierDied); what the engine spent until then is in
		// the soldier's record (SPEC §10.6).
		if sp, ok := engine.ReadSpent(l.ResultSpent(t.ID)); ok {
			r.Usage, r.CostUSD = sp.Usage, sp.CostUSD
		}
	}
	now := g.o.Clock.Now()
	final := doc.Result{RawResult: *r, General: g.name, CompletedAt: doc.FormatTime(now), RetryCount: t.RetryCount}
	final.DurationSeconds = max(now.Sub(started).Seconds(), 0)
	if ids.Valid(sid) {
		final.SoldierID = sid
	}
	// SPEC §12.3: the outputs run before the result is published, so the
	// king's message in the task's thread can name each outcome.
	outcomes, err := g.runOutputs(ctx, t, ws, r)
	if errors.Is(err, store.ErrFenced) {
		g.lost(ctx, t, ws, fmt.Errorf("%w: %w", errLost, err))
		return
	} else if err != nil {
		// The raw result stays; the records let the next try go on from
		// where this one stopped.
		g.strand(stranded{t: t, sid: sid, started: started, ws: ws}, err)
		return
	}
	final.OutputOutcomes = outcomes
	keepConversation(g.o.Manifest.TrackConversation, t, &final, ws.RepoDir)
	final.Host = g.o.Host
	var cp *doc.Checkpoint
	if r.Status == doc.ResultNeedsHuman {
		cp = &doc.Checkpoint{TaskID: t.ID, SessionID: r.SessionID, Workdir: ws.RepoDir, Thread: threadOf(t),
			Question: r.Question, General: g.name, Repo: doc.StringPtr(ws.Repo), Host: g.o.Host}
	}
	if err := g.publish(ctx, t, cp, &final); errors.Is(err, errLost) {
		g.lost(ctx, t, ws, err)
		return
	} else if err != nil {
		// The raw result stays: the next tick finishes the task from it.
		g.strand(stranded{t: t, sid: sid, started: started, ws: ws}, err)
		return
	}
	g.written(t.ID)
	// After the final result: a finish retried for a full disk must not
	// append the same lessons twice.
	if len(r.MemoryUpdates) > 0 {
		if err := g.appendMemory(t.ID, r.MemoryUpdates); err != nil {
			g.log.Warn("append memory", "task", t.ID, "err", err)
		}
	}
	// The agent's staging result is in the raw result now; whatever path
	// the soldier took (killed, timed out), it does not outlive the attempt.
	_ = os.Remove(l.ResultStaging(t.ID))
	g.trace(t.ID, "final")
	// §10.6: the attempt's own figures (the king sums them per task).
	g.emit("soldier.completed", map[string]any{"task_id": t.ID, "soldier_id": sid, "status": r.Status,
		"error_reason": r.ErrorReason, "retry_count": t.RetryCount, "duration_seconds": final.DurationSeconds,
		"cost_usd": r.CostUSD, "usage": r.Usage, "outputs": final.OutputOutcomes})
	g.log.Info("task finished", "task", t.ID, "status", r.Status, "reason", r.ErrorReason)
	// §9.9: the task dir goes with the final result, unless a human is
	// asked (the resume runs in it and removes it at its end), a
	// conversation is kept, or a resume will run again in it.
	if r.Status != doc.ResultNeedsHuman && !final.TrackConversation && !resumeRunsAgain(ws, r) {
		g.removeWorkspace(context.WithoutCancel(ctx), ws)
	}
}

// resumeRunsAgain reports whether a resume's borrowed workdir (a question's
// or a kept conversation's) must outlive this attempt: the king re-queues a
// UsageLimited failure after the pause and retries a non-terminal one
// (EngineError, SoldierDied), and the next attempt resumes the session the
// soldier kept for it in this very directory. The general does not know
// whether the king's retries are spent; when they are, the task fails for
// good and the chamberlain's task-dir retention removes the directory (its
// task is no longer pending or in progress).
func resumeRunsAgain(ws workspace, r *doc.RawResult) bool {
	if !ws.Borrowed || (r.Status != doc.ResultFailed && r.Status != doc.ResultKilled) {
		return false
	}
	return r.ErrorReason == doc.ReasonUsageLimited || !r.IsTerminal()
}

// keepConversation marks a successful Slack-originated result as a
// conversation to keep when the manifest asks for it (or the agent did),
// and records the workdir its follow-up resumes in (kept until retention).
func keepConversation(manifest bool, t *doc.Task, final *doc.Result, workdir string) {
	if final.Status != doc.ResultSuccess || threadOf(t) == nil {
		final.TrackConversation = false
		return
	}
	if manifest {
		final.TrackConversation = true
	}
	if final.TrackConversation {
		final.Workdir = workdir
	}
}

// threadOf is the Slack thread a task belongs to: a resume task's thread,
// else a Slack event's message (DM or mention) as the thread parent.
func threadOf(t *doc.Task) *doc.Thread {
	if t.Thread != nil {
		return t.Thread
	}
	ch, _ := t.Payload["channel"].(string)
	ts, _ := t.Payload["thread_ts"].(string)
	if ts == "" {
		ts, _ = t.Payload["ts"].(string)
	}
	if ch != "" && ts != "" {
		return &doc.Thread{Channel: ch, ThreadTS: ts}
	}
	return nil
}
