package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Operator control (SPEC §10.11): the king acts on the requests `start
// pause|resume|task cancel|unpark` drop into state/king/control/ (pkg/control owns
// the file formats). Each request is answered in control/replies/ and then
// removed; acting on one twice is harmless (pause keeps its first since,
// cancel finds the task already finished).

// replyRetention is how long an unread reply is kept; cancelRetention how
// long the record of a finished cancelled task is.
const (
	replyRetention  = 24 * time.Hour
	cancelRetention = 7 * 24 * time.Hour
)

// processControl is the tick's control step: queued requests first, then the
// cancel records (level-triggered: a cancelled task a retry re-queued is
// ended on a later tick).
func (k *King) processControl() error {
	var errs []error
	reqs, err := control.Requests(k.ctx(), k.kv)
	if err != nil {
		errs = append(errs, err)
	}
	for _, q := range reqs {
		if err := k.handleControl(q); err != nil {
			errs = append(errs, err)
		}
	}
	if err := k.enforceCancels(); err != nil {
		errs = append(errs, err)
	}
	k.pruneReplies()
	return errors.Join(errs...)
}

// applyPause makes admission refuse every task while paused.
func (k *King) applyPause(adm *admission) {
	p, err := control.ReadPause(k.ctx(), k.kv)
	if err != nil {
		k.log.Warn("pause state unreadable; staying paused", "err", err)
	}
	if p != nil {
		adm.paused = &hold{reason: waits.Pause,
			detail: "paused by " + firstNonEmpty(p.By, "the operator") + " since " + firstNonEmpty(p.Since, "an unknown time") + " (`start resume` lifts it)"}
		adm.operator = adm.paused
	}
}

func (k *King) handleControl(q control.Queued) error {
	var req control.Request
	err := json.Unmarshal(q.Data, &req)
	if err == nil {
		err = req.Validate()
	}
	stem := q.Key
	if err == nil && req.ID != stem {
		err = fmt.Errorf("id %q does not match the file name", req.ID)
	}
	var rep control.Reply
	if err != nil {
		rep = control.Reply{ID: stem, OK: false, Message: "request refused: " + err.Error()}
		k.log.Warn("control request refused", "request", stem, "err", err)
	} else {
		rep = k.act(&req)
	}
	rep.At = doc.FormatTime(k.now())
	return control.Answer(k.ctx(), k.kv, q.Key, rep)
}

// act carries out one valid request.
func (k *King) act(req *control.Request) control.Reply {
	rep := control.Reply{ID: req.ID, Action: req.Action, TaskID: req.TaskID}
	by := firstNonEmpty(req.By, "operator")
	var err error
	switch req.Action {
	case control.ActionPause:
		rep.Message, err = k.pause(by)
	case control.ActionResume:
		rep.Message, err = k.resume(by, req.Engine)
	case control.ActionCancel:
		rep.Message, err = k.cancel(req.TaskID, by)
	case control.ActionCancelEvent:
		rep.EventID = req.EventID
		rep.Message, err = k.cancelEvent(req.EventID, by)
	case control.ActionUnpark:
		rep.Message, err = k.unpark(req.Target, by)
	}
	if err != nil {
		rep.Message = err.Error()
		return rep
	}
	rep.OK = true
	k.log.Info("control request done", "action", req.Action, "task", req.TaskID, "event", req.EventID, "by", by, "result", rep.Message)
	return rep
}

func (k *King) pause(by string) (string, error) {
	if p, _ := control.ReadPause(k.ctx(), k.kv); p != nil && p.Since != "" {
		return "already paused since " + p.Since + " by " + p.By, nil
	}
	p := control.Pause{Since: doc.FormatTime(k.now()), By: by}
	if err := control.WritePause(k.ctx(), k.kv, p); err != nil {
		return "", err
	}
	k.em.Emit("system.paused", map[string]any{"by": by, "since": p.Since})
	return "paused: no new task is admitted, schedules are held, running soldiers finish", nil
}

// resume lifts the operator's pause and every engine's usage-limit pause,
// or, given an engine, that engine's pause alone, and says which it lifted.
func (k *King) resume(by, engine string) (string, error) {
	var done []string
	if engine == "" {
		was, err := control.LiftPause(k.ctx(), k.kv)
		if err != nil {
			return "", err
		}
		if was {
			k.em.Emit("system.resumed", map[string]any{"by": by})
			done = append(done, "resumed")
		}
	}
	lifted, err := k.liftEnginePauses(by, engine)
	done = append(done, lifted...)
	if err != nil {
		return strings.Join(done, "; "), err
	}
	if len(done) == 0 {
		if engine != "" {
			return "engine " + engine + " is not paused", nil
		}
		return "not paused", nil
	}
	return strings.Join(done, "; "), nil
}

// liftEnginePauses ends the active usage-limit pause of engine (every
// engine when ""): the pause file loses its entry, then the tasks the
// pause re-queued (not_before at the reset, SPEC §10.8) are re-queued to
// run now, so the general claims them at once. An operator lifts a pause
// when the limit is gone sooner than the engine said (a plan upgraded, a
// reset misread); a limit still in force just pauses the engine again.
func (k *King) liftEnginePauses(by, engine string) ([]string, error) {
	now := k.now()
	pf, err := enginepause.Load(k.ctx(), k.kv)
	if err != nil {
		return nil, fmt.Errorf("read engine pauses: %w", err)
	}
	var lifted, order []string
	was := map[string]time.Time{}
	for _, e := range pf.Engines() {
		if engine != "" && e != engine {
			continue
		}
		until, active := pf.Active(e, now)
		delete(pf, e)
		if active {
			was[e] = until
			order = append(order, e)
			lifted = append(lifted, fmt.Sprintf("lifted the %s usage-limit pause (was until %s)", e, k.clockTime(until)))
		}
	}
	if len(was) == 0 {
		return nil, nil
	}
	if err := enginepause.Save(k.ctx(), k.kv, pf); err != nil {
		return nil, fmt.Errorf("record the lifted engine pauses: %w", err)
	}
	for _, e := range order {
		until := was[e]
		k.em.Emit("system.engine_resumed", map[string]any{"engine": e, "by": by, "was_until": doc.FormatTime(until)})
		k.log.Info("engine pause lifted by the operator", "engine", e, "by", by, "was_until", doc.FormatTime(until))
	}
	return lifted, k.releaseParked(was, now)
}

// releaseParked re-queues to run now the pending tasks whose not_before an
// engine pause set (a usage limit re-queued them: usage_limits > 0, and a
// not_before still ahead, no later than the lifted pause).
func (k *King) releaseParked(was map[string]time.Time, now time.Time) error {
	es, err := k.tasks.List(layout.Pending)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range es {
		var t doc.Task
		if e.Decode(&t) != nil || t.UsageLimits == 0 {
			continue
		}
		until, ok := was[k.engineOf(t.TargetGeneral)]
		nb, err := doc.ParseTime(t.NotBefore)
		if !ok || err != nil || !nb.After(now) || nb.After(until) {
			continue
		}
		if err := k.runNow(&t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("release task %s: %w", t.ID, err))
		}
	}
	return errors.Join(errs...)
}

// runNow rewrites pending task t to run now, in one transaction fenced by
// the king's lease that first takes the task out of pending/ as a claim
// would: a general that claimed it meanwhile keeps it (the error
// satisfies fs.ErrNotExist), and a general never holds a task the king
// rewrites.
func (k *King) runNow(t *doc.Task) error {
	t.NotBefore = doc.FormatTime(k.now())
	err := k.group(func(g *queue.GroupTx) error {
		if err := g.Move(k.tasks, layout.Pending, layout.InProgress, t.ID); err != nil {
			return err
		}
		if err := g.Put(k.tasks, layout.Pending, t.ID, t); err != nil {
			return err
		}
		return g.Remove(k.tasks, layout.InProgress, t.ID)
	})
	if err != nil {
		return err
	}
	k.em.Emit("task.retry_scheduled", map[string]any{"reason": "engine pause lifted", "attempt_counted": false,
		"task_id": t.ID, "retry_count": t.RetryCount, "not_before": t.NotBefore, "general": t.TargetGeneral})
	return nil
}

// cancel ends a pending or running task as failed/Cancelled (terminal).
// The cancel record is written before anything is acted on.
func (k *King) cancel(id, by string) (string, error) {
	if !taskIDRE.MatchString(id) {
		return "", fmt.Errorf("%q is not a task id (task-YYYYMMDD-NNN)", id)
	}
	st, ok := k.tasks.Find(id)
	if !ok {
		return "", fmt.Errorf("no task %s", id)
	}
	if st == layout.Completed {
		return k.withdrawQuestion(id, by)
	}
	if st != layout.Pending && st != layout.InProgress {
		return "", fmt.Errorf("task %s already finished (%s)", id, st)
	}
	var t doc.Task
	if err := k.tasks.ReadJSON(st, id, &t); err != nil {
		if st == layout.Pending {
			// Claimed by its general meanwhile.
			st = layout.InProgress
			err = k.tasks.ReadJSON(st, id, &t)
		}
		if err != nil {
			return "", fmt.Errorf("read task %s: %w", id, err)
		}
	}
	rec := control.Cancelled{TaskID: id, RetryCount: t.RetryCount, Was: st, By: by, At: doc.FormatTime(k.now())}
	if st == layout.Pending {
		if err := control.WriteCancelled(k.ctx(), k.kv, rec); err != nil {
			return "", err
		}
		// The king takes the task over; a general claiming it at this very
		// moment wins, and the task is cancelled as a running one.
		err := k.finish(&t, failedResult(&t, doc.ReasonCancelled, "cancelled by "+by, true), true)
		if err == nil {
			k.em.Emit("task.cancelled", map[string]any{"task_id": id, "by": by, "was": layout.Pending, "general": t.TargetGeneral})
			return "cancelled " + id + " (it was pending)", nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		rec.Was = layout.InProgress
	}
	// An attempt that already ended well (its soldier published success,
	// skipped or needs_human; its general may not have finished the task
	// yet) is not cancelled: saying "cancelling" and then completing it ✅
	// would be a lie, and its records would disagree.
	outcome, final := k.attemptOutcome(id)
	if outcome != "" && !failedOutcome(outcome) {
		return "", fmt.Errorf("task %s already finished (%s); nothing to cancel", id, outcome)
	}
	if err := control.WriteCancelled(k.ctx(), k.kv, rec); err != nil {
		return "", err
	}
	k.em.Emit("task.cancelled", map[string]any{"task_id": id, "by": by, "was": layout.InProgress, "general": t.TargetGeneral})
	if final {
		// The attempt failed and its final result waits for this tick's
		// results step: the record makes it Cancelled, never retried.
		return "cancelled " + id + ": its attempt had already failed; it ends Cancelled, not retried", nil
	}
	// The king only records the cancel (SPEC §12.1): the general owning the
	// soldier, on the host that runs it, reads the record, kills it and
	// reports the attempt Cancelled.
	return "cancelling " + id + ": the general running it kills its soldier; " + t.TargetGeneral + " reports it as Cancelled", nil
}

// cancelEvent withdraws an event no task was made of yet: from pending/ or
// petitioning/ to rejected/, with a reason naming who cancelled it. One
// already dispatched is refused with its task, the thing to cancel now.
// The king alone dispatches and runs this in its own tick, so the event
// cannot be dispatched between the look and the move.
func (k *King) cancelEvent(id, by string) (string, error) {
	st, ok := k.events.Find(id)
	if !ok {
		return "", fmt.Errorf("no event %s", id)
	}
	switch st {
	case layout.Pending, layout.Petitioning:
	case layout.Rejected:
		return "", fmt.Errorf("event %s was already rejected", id)
	default:
		var ev doc.Event
		if k.events.ReadJSON(st, id, &ev) == nil && ev.TaskID != "" {
			return "", fmt.Errorf("event %s was already dispatched as task %s (%s); cancel the task: start task cancel %s", id, ev.TaskID, st, ev.TaskID)
		}
		return "", fmt.Errorf("event %s is already %s; nothing to cancel", id, st)
	}
	if err := k.reject(k.events, st, id, "cancelled by "+by); err != nil {
		return "", fmt.Errorf("reject event %s: %w", id, err)
	}
	k.em.Emit("event.cancelled", map[string]any{"event_id": id, "by": by, "was": st})
	return "cancelled event " + id + " (it was " + st + "); it is in rejected/", nil
}

// attemptOutcome is the status the current attempt of an in-progress task
// ended with ("" while it runs), from its final result when its general
// wrote one (final true), else from its soldier's raw result. The general
// removes the previous attempt's files before spawning (SPEC §9.1), so a
// raw result present is this attempt's.
func (k *King) attemptOutcome(task string) (status string, final bool) {
	if b, found, err := k.readResult(task); found && err == nil {
		if st := statusOf(b); st != "" {
			return st, true
		}
	}
	// The raw result's: "" when there is none or it does not decode.
	b, err := queue.ReadLimited(k.l.ResultRaw(task), queue.DefaultMaxSize)
	if err != nil {
		return "", false
	}
	return statusOf(b), false
}

// statusOf is the status of a raw or final result; "" when it does not
// decode.
func statusOf(b []byte) string {
	var r struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.Status
}

// failedOutcome reports whether an attempt's status is a failure, which a
// cancel turns into Cancelled (anything else is a finished attempt).
func failedOutcome(status string) bool {
	return status != doc.ResultSuccess && status != doc.ResultSkipped && status != doc.ResultNeedsHuman
}

// dropCancel removes a task's cancel record: the task ended otherwise, and
// its records must not say Cancelled.
func (k *King) dropCancel(task string) {
	if err := control.DropCancelled(k.ctx(), k.kv, task); err != nil {
		k.log.Warn("remove a cancel record that lost the race", "task", task, "err", err)
	}
}

// enforceCancels re-checks every cancel record: a cancelled task a retry
// re-queued before the record took effect is ended from pending/, the
// record of an attempt that finished first goes, and the records of
// finished tasks are removed after cancelRetention. A running cancelled
// attempt is its general's to kill (SPEC §12.1).
func (k *King) enforceCancels() error {
	recs, err := control.CancelledTasks(k.ctx(), k.kv)
	if err != nil {
		return err
	}
	for _, task := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[task]
		if !taskIDRE.MatchString(task) {
			continue
		}
		st, found := k.tasks.Find(task)
		switch {
		case !found || st == layout.Completed || st == layout.Rejected:
			// Kept for `start tasks` as long as finished tasks are listed.
			if at, err := doc.ParseTime(rec.At); err == nil && k.now().Sub(at) > cancelRetention {
				k.dropCancel(task)
			}
		case st == layout.Pending:
			// A retry re-queued it before the record took effect.
			var t doc.Task
			if k.tasks.ReadJSON(layout.Pending, task, &t) != nil {
				continue
			}
			if err := k.finish(&t, failedResult(&t, doc.ReasonCancelled, "cancelled by "+rec.By, true), true); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case st == layout.InProgress:
			// The soldier's own outcome got there first and is no failure:
			// the attempt finished, the cancel came too late.
			if outcome, final := k.attemptOutcome(task); !final && outcome != "" && !failedOutcome(outcome) {
				k.log.Info("cancel came too late: the attempt finished", "task", task, "status", outcome)
				k.dropCancel(task)
			}
		}
	}
	return nil
}

// cancelOverride turns a failure of a cancelled task into Cancelled, so
// whatever killed the attempt (the cancel itself, a soldier that exited as
// it was killed) it is never retried.
func (k *King) cancelOverride(t *doc.Task, res *doc.Result) {
	if res.Status != doc.ResultFailed && res.Status != doc.ResultKilled {
		return
	}
	if res.ErrorReason == doc.ReasonCancelled {
		return
	}
	rec := control.ReadCancelled(k.ctx(), k.kv, t.ID)
	if rec == nil || rec.RetryCount != t.RetryCount {
		return
	}
	terminal := true
	res.Status, res.ErrorReason, res.Terminal = doc.ResultFailed, doc.ReasonCancelled, &terminal
	res.Error = "cancelled by " + rec.By + " (" + firstNonEmpty(res.Error, "no detail") + ")"
}

// pruneReplies removes replies nobody read within replyRetention.
func (k *King) pruneReplies() {
	if err := control.PruneReplies(k.ctx(), k.kv, k.now().Add(-replyRetention)); err != nil {
		k.log.Warn("prune control replies", "err", err)
	}
}

// withdrawQuestion closes a task that waits for a human's answer
// (needs_human, in tasks/completed/): the cancel record first (from then on
// a reply in its thread starts nothing, handleReply), the ⛔ in its thread,
// then the task's status failed, as a cancelled task ends. A question
// already answered (its resume task exists) is not withdrawn: the resume
// task is the one to cancel.
func (k *King) withdrawQuestion(id, by string) (string, error) {
	var t doc.Task
	if err := k.tasks.ReadJSON(layout.Completed, id, &t); err != nil {
		return "", fmt.Errorf("read task %s: %w", id, err)
	}
	if t.Status != doc.ResultNeedsHuman {
		return "", fmt.Errorf("task %s already finished (%s); nothing to cancel", id, t.Status)
	}
	if r := k.resumeOf(id); r != "" {
		return "", fmt.Errorf("task %s's question was answered: resume task %s carries it on (cancel that one)", id, r)
	}
	rec := control.Cancelled{TaskID: id, RetryCount: t.RetryCount, Was: doc.ResultNeedsHuman, By: by, At: doc.FormatTime(k.now())}
	if err := control.WriteCancelled(k.ctx(), k.kv, rec); err != nil {
		return "", err
	}
	res := failedResult(&t, doc.ReasonCancelled, "cancelled by "+by, true)
	res.Error = "question withdrawn by " + by
	m := &doc.Message{
		ID: msgFinalID(id, doc.FinalFailed), Type: doc.MessageNotification, TaskID: strPtr(id),
		Urgency: doc.UrgencyNormal, Final: strPtr(doc.FinalFailed),
		Content: fmt.Sprintf("⛔ %s: %s cancelled (%s); a reply here starts nothing", t.TargetGeneral, id, res.Error),
		Context: map[string]any{"general": t.TargetGeneral, "status": res.Status, "error_reason": res.ErrorReason,
			"error": res.Error, "retry_count": t.RetryCount, "task_type": t.Type, "repo": t.Repo},
	}
	if th := k.taskThread(&t); th != nil {
		m.ThreadTS, m.Channel = strPtr(th.ThreadTS), th.Channel
	}
	if _, err := k.putMessage(m); err != nil {
		return "", err
	}
	t.Status = doc.ResultFailed
	if err := k.group(func(g *queue.GroupTx) error { return g.Put(k.tasks, layout.Completed, id, &t) }); err != nil {
		return "", fmt.Errorf("mark task %s cancelled: %w", id, err)
	}
	k.em.Emit("task.cancelled", map[string]any{"task_id": id, "by": by, "was": doc.ResultNeedsHuman, "general": t.TargetGeneral})
	k.em.EmitAs("task.failed", t.TargetGeneral, withTotals(k.taskTotals(&t), map[string]any{
		"task_id": id, "status": res.Status, "error": res.Error, "error_reason": res.ErrorReason,
		"retry_count": t.RetryCount, "terminal": true, "general": t.TargetGeneral,
	}))
	return "cancelled " + id + ": its question is withdrawn; a reply in its thread starts nothing", nil
}

// resumeOf returns the resume task carrying on task's question, or "".
func (k *King) resumeOf(task string) string {
	for _, st := range []string{layout.Pending, layout.InProgress, layout.Completed} {
		es, err := k.tasks.List(st)
		if err != nil {
			continue
		}
		for _, e := range es {
			var head struct {
				Original string `json:"original_task_id"`
			}
			if e.Decode(&head) == nil && head.Original == task {
				return e.ID
			}
		}
	}
	return ""
}

// taskThread is the Slack thread of a task: its checkpoint's (where the
// general recorded it, SPEC §9.8), else the task's own.
func (k *King) taskThread(t *doc.Task) *doc.Thread {
	if cp := k.checkpoint(t.ID); cp != nil {
		if cp.Thread != nil && cp.Thread.Channel != "" && cp.Thread.ThreadTS != "" {
			return cp.Thread
		}
	}
	if t.Thread != nil && t.Thread.Channel != "" && t.Thread.ThreadTS != "" {
		return t.Thread
	}
	return nil
}
