package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// processResults handles every final result whose task is still in
// tasks/in_progress/ with the same retry_count (SPEC §4.4, §9.1). The task's
// presence in in_progress/ is what marks a result unprocessed, so the step
// is repeated safely after a crash.
func (k *King) processResults() error {
	idl, err := k.tasks.IDs(layout.InProgress)
	if err != nil {
		return err
	}
	sort.Strings(idl)
	var errs []error
	var todo []attempt
	for _, id := range idl {
		if !taskIDRE.MatchString(id) {
			continue
		}
		b, found, err := k.readResult(id)
		if !found {
			// A retry that died after deleting the old result but before
			// re-queueing left its mark (status retrying, written only by
			// the king): finish it, or the task would sit here forever.
			var t doc.Task
			if k.tasks.ReadJSON(layout.InProgress, id, &t) == nil && t.Status == doc.TaskRetrying {
				if err := k.requeue(&t); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		var t doc.Task
		if err := k.tasks.ReadJSON(layout.InProgress, id, &t); err != nil {
			continue // moved meanwhile, or unreadable (the general rejects it)
		}
		res := k.decodeResult(&t, b, err)
		if res == nil {
			continue
		}
		if res.RetryCount != t.RetryCount {
			if res.RetryCount == t.RetryCount-1 && t.NotBefore != "" {
				// A retry died between rewriting the task and re-queueing it:
				// finish that retry rather than leave it stranded.
				if err := k.requeue(&t); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			k.log.Debug("result of another attempt ignored", "task", id, "result_retry_count", res.RetryCount, "task_retry_count", t.RetryCount)
			continue
		}
		todo = append(todo, attempt{t: &t, res: res, m: decodeMoney(b)})
	}
	// Every attempt's cost goes into the ledger first, in one append, then
	// each result is acted on; the tasks that end complete together, in
	// one group (completeAll).
	recorded, err := k.recordAttempts(todo)
	if err != nil {
		errs = append(errs, err)
	}
	var cs []completion
	for _, a := range recorded {
		if err := k.finishAttempt(&cs, a.t, a.res, a.m); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", a.t.ID, err))
		}
	}
	if err := k.completeAll(cs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// readResult reads task's final result through the king's KV (kv.NSResults:
// state/results/<task>.json on the files store). found is false when there is none; a result too large
// or unreadable is found with an error (decodeResult makes it
// InvalidResult).
func (k *King) readResult(task string) (b []byte, found bool, err error) {
	b, err = k.kv.Get(k.ctx(), kv.NSResults, task)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err == nil && int64(len(b)) > queue.DefaultMaxSize {
		return nil, true, fmt.Errorf("final result %s: %w", task, atomicfile.ErrTooLarge)
	}
	return b, true, err
}

// decodeResult validates a final result. One that fails its schema (the
// general's fault) becomes a terminal InvalidResult failure of the current
// attempt, unless it plainly belongs to another attempt.
func (k *King) decodeResult(t *doc.Task, b []byte, readErr error) *doc.Result {
	var err error = readErr
	if err == nil {
		var res *doc.Result
		if res, err = schema.DecodeResult(b); err == nil {
			return res
		}
	}
	var peek struct {
		RetryCount *int `json:"retry_count"`
	}
	if json.Unmarshal(b, &peek) == nil && peek.RetryCount != nil && *peek.RetryCount != t.RetryCount {
		return nil
	}
	k.log.Error("final result unusable", "task", t.ID, "err", err)
	return &doc.Result{
		RawResult: doc.RawResult{
			TaskID: t.ID, Status: doc.ResultFailed, ErrorReason: doc.ReasonInvalidResult,
			Error: "final result unusable: " + err.Error(),
		},
		General:    t.TargetGeneral,
		RetryCount: t.RetryCount,
	}
}

// finish acts on one attempt's final result at once (finishInto, then
// completeAll of its completion). With pending it ends pending task t with
// res (a terminal outcome: a cancel, a failure decided before any attempt)
// in the one transaction that takes the task out of pending/: a general
// that claimed it meanwhile keeps it, and the error satisfies
// fs.ErrNotExist.
func (k *King) finish(t *doc.Task, res *doc.Result, pending bool) error {
	var cs []completion
	if err := k.finishInto(&cs, t, res); err != nil {
		return err
	}
	for i := range cs {
		cs[i].pending = pending
	}
	if pending && len(cs) == 0 {
		return fmt.Errorf("task %s: a pending task's outcome must end it", t.ID)
	}
	return k.completeAll(cs)
}

// failedResult is a failed outcome of t's current attempt the king
// decides (a cancel, a lost host, a general gone): reason, and msg as its
// summary and error; terminal when it must never run again.
func failedResult(t *doc.Task, reason, msg string, terminal bool) *doc.Result {
	res := &doc.Result{
		RawResult: doc.RawResult{TaskID: t.ID, Status: doc.ResultFailed, Summary: msg, Error: msg, ErrorReason: reason},
		General:   t.TargetGeneral, RetryCount: t.RetryCount,
	}
	if terminal {
		res.Terminal = &terminal
	}
	return res
}

// finishInto acts on one attempt's final result: a retry happens at once;
// an outcome that ends the task (its notification or question, the
// completing moves) is added to cs for completeAll.
func (k *King) finishInto(cs *[]completion, t *doc.Task, res *doc.Result) error {
	k.cancelOverride(t, res)
	general := t.TargetGeneral
	k.noteFailure(t, res) // breaker.go
	// A parked general's canary is never retried: its failure parks the
	// general again (breaker.go).
	stalled, err := k.stalledBefore(t, res)
	if err != nil {
		return err // the ledger answers on a later tick
	}
	if retryable(res, t.RetryCount, k.cfg.Retry.MaxAttempts, stalled) && !k.isCanary(t) {
		return k.retry(t, res)
	}
	if !failedOutcome(res.Status) {
		// A cancel that lost the race to this outcome leaves no mark: the
		// task completed, and nothing may say Cancelled about it.
		k.dropCancel(t.ID)
	}
	// The task's totals over its attempts, read once for its message and
	// its task.* event (§10.6).
	tot := k.taskTotals(t)
	c := completion{t: t}
	switch res.Status {
	case doc.ResultSuccess:
		c.msgs = k.finalMessages(t, res, doc.FinalDone, tot)
		c.status, c.evType, c.data = doc.TaskCompleted, "task.completed", withTotals(tot, map[string]any{
			"task_id": t.ID, "status": res.Status, "duration_seconds": res.DurationSeconds, "general": general,
		})
	case doc.ResultSkipped:
		c.msgs = k.finalMessages(t, res, doc.FinalSkipped, tot)
		c.status, c.evType, c.data = doc.ResultSkipped, "task.completed", withTotals(tot, map[string]any{
			"task_id": t.ID, "status": res.Status, "reason": res.Reason, "duration_seconds": res.DurationSeconds, "general": general,
		})
	case doc.ResultNeedsHuman:
		c.msgs = []*doc.Message{k.questionMessage(t, res)}
		c.status, c.evType, c.data = doc.ResultNeedsHuman, "task.needs_human", withTotals(tot, map[string]any{
			"task_id": t.ID, "question": res.Question, "duration_seconds": res.DurationSeconds, "general": general,
		})
	default:
		c.msgs = k.finalMessages(t, res, doc.FinalFailed, tot)
		c.status, c.evType, c.data = doc.ResultFailed, "task.failed", withTotals(tot, map[string]any{
			"task_id": t.ID, "status": res.Status, "error": res.Error, "error_reason": res.ErrorReason,
			"retry_count": t.RetryCount, "terminal": res.IsTerminal(), "duration_seconds": res.DurationSeconds, "general": general,
		})
	}
	if len(res.OutputOutcomes) > 0 {
		// What became of the agent's outputs (SPEC §12.3), with the
		// task's outcome.
		c.data["outputs"] = res.OutputOutcomes
	}
	*cs = append(*cs, c)
	return nil
}

// finalMessages returns the completion notification (msg-<task>-done|failed|
// skipped, into notify_channel when given) and the proclamation, if any.
func (k *King) finalMessages(t *doc.Task, res *doc.Result, final string, tot spend.Totals) []*doc.Message {
	var content string
	ctx := map[string]any{"general": t.TargetGeneral, "status": res.Status, "summary": res.Summary,
		"duration_seconds": res.DurationSeconds, "task_type": t.Type, "repo": t.Repo}
	switch {
	case final == doc.FinalDone:
		content = fmt.Sprintf("✅ %s finished %s%s: %s", t.TargetGeneral, t.ID, costNote(tot, res), redact.Clip(res.Summary, 3000))
	case final == doc.FinalSkipped:
		content = fmt.Sprintf("⏭️ %s skipped %s: %s", t.TargetGeneral, t.ID, redact.Clip(firstNonEmpty(res.Reason, res.Summary), 3000))
		ctx["reason"] = res.Reason
	case res.ErrorReason == doc.ReasonCancelled: // a cancel: ⛔, not ❌
		content = fmt.Sprintf("⛔ %s: %s cancelled (%s)", t.TargetGeneral, t.ID, redact.Clip(firstNonEmpty(res.Error, res.Summary), 3000))
		ctx["error_reason"] = res.ErrorReason
		ctx["error"] = redact.Clip(res.Error, 3000)
		ctx["retry_count"] = t.RetryCount
	default:
		attempts := t.RetryCount + 1
		content = fmt.Sprintf("❌ %s failed %s after %d attempt%s%s (%s): %s", t.TargetGeneral, t.ID, attempts,
			plural(attempts), costNote(tot, res), firstNonEmpty(res.ErrorReason, res.Status), redact.Clip(firstNonEmpty(res.Error, res.Summary), 3000))
		ctx["error_reason"] = res.ErrorReason
		ctx["error"] = redact.Clip(res.Error, 3000)
		ctx["retry_count"] = t.RetryCount
	}
	content += outcomeLines(res.OutputOutcomes)
	m := &doc.Message{
		ID: msgFinalID(t.ID, final), Type: doc.MessageNotification, TaskID: strPtr(t.ID),
		Channel: res.NotifyChannel, Urgency: doc.UrgencyNormal, Content: content, Context: ctx,
		Final: strPtr(final),
	}
	m.TrackConversation = k.conversation(t, res)
	ms := []*doc.Message{m}
	// Proclamations only on the final success/failed/skipped (SPEC §9.28),
	// under task_id proclamation-<task> so the envoy posts a new message.
	if p := res.Proclamation; p != nil && p.Channel != "" && p.Message != "" {
		ms = append(ms, &doc.Message{
			ID: msgProclamationID(t.ID), Type: doc.MessageNotification, TaskID: strPtr("proclamation-" + t.ID),
			Channel: p.Channel, Urgency: doc.UrgencyNormal, Content: p.Message,
			Context: map[string]any{"general": t.TargetGeneral, "task": t.ID, "proclamation": true},
		})
	}
	return ms
}

// outcomeLines lists what became of the agent's outputs (SPEC §12.3), one
// line each after the final message's first ("github.review: <link>",
// "github.push refused: <reason>", "jira.comment failed: <error>"; the
// result's schema allows no other state), in plain text: the envoy
// escapes it.
func outcomeLines(outs []doc.OutputOutcome) string {
	var b strings.Builder
	for _, o := range outs {
		b.WriteString("\n")
		switch o.State {
		case doc.OutcomeDone:
			fmt.Fprintf(&b, "%s: %s", o.Kind, redact.Clip(firstNonEmpty(o.Link, "done"), 500))
		case doc.OutcomeRefused:
			fmt.Fprintf(&b, "%s refused: %s", o.Kind, redact.Clip(o.Reason, 500))
		case doc.OutcomeFailed:
			fmt.Fprintf(&b, "%s failed: %s", o.Kind, redact.Clip(o.Error, 500))
		}
	}
	return b.String()
}

// questionMessage asks the human in the task's thread; reply_context is what
// the envoy hands back with the answer so the king can resume (SPEC §9.8).
func (k *King) questionMessage(t *doc.Task, res *doc.Result) *doc.Message {
	rc := &doc.ReplyContext{General: t.TargetGeneral, SessionID: res.SessionID, Repo: t.Repo, TaskID: t.ID}
	var thread *doc.Thread
	if cp := k.checkpoint(t.ID); cp != nil {
		if rc.SessionID == "" {
			rc.SessionID = cp.SessionID
		}
		thread = cp.Thread
	}
	if rc.SessionID == "" {
		if b, err := os.ReadFile(k.l.ResultSessionID(t.ID)); err == nil {
			rc.SessionID = strings.TrimSpace(string(b))
		}
	}
	if thread == nil {
		thread = t.Thread
	}
	m := &doc.Message{
		ID: msgQuestionID(t.ID), Type: doc.MessageHumanInputRequest, TaskID: strPtr(t.ID),
		Urgency: doc.UrgencyHigh, Content: "❓ " + t.TargetGeneral + " needs your input on " + t.ID + ": " + redact.Clip(res.Question, 3000),
		Context:      map[string]any{"general": t.TargetGeneral, "question": res.Question, "summary": res.Summary},
		ReplyContext: rc,
	}
	if thread != nil && thread.Channel != "" && thread.ThreadTS != "" {
		rc.Channel, rc.ThreadTS = thread.Channel, thread.ThreadTS
		m.ThreadTS = strPtr(thread.ThreadTS)
		m.Channel = thread.Channel
	}
	return m
}

// completion is a task that ends: its messages, its final status and the
// internal event of its outcome.
type completion struct {
	t              *doc.Task
	msgs           []*doc.Message
	status, evType string
	data           map[string]any
	pending        bool // t is still in pending/ (finish)
}

// completeAll ends the tasks of cs in one transaction fenced by the king's
// lease (SPEC §9.7): their messages are queued (a message already queued or
// sent is not written again), each event and task is written to completed/
// with its final status, and their dispatched/ and in_progress/ copies go;
// each outcome is emitted once, as the task's general, after the commit.
// The task leaving in_progress/ is the completing step: until the
// transaction commits nothing of it is visible, and a repeat redoes it all.
func (k *King) completeAll(cs []completion) error {
	if len(cs) == 0 {
		return nil
	}
	events := make([]map[string]any, len(cs))
	for i, c := range cs {
		c.t.Status = c.status
		if h := k.ranOn(c.t.ID); h != "" {
			// Where the task ran: its resume or a follow-up
			// of its conversation runs there (resume.go).
			c.t.Host = h
		}
		events[i] = k.completedDoc(layout.Dispatched, c.t.EventID, "")
	}
	err := k.group(func(g *queue.GroupTx) error {
		for _, c := range cs {
			if c.pending {
				// As a claim would: a general that claimed it first keeps it.
				if err := g.Move(k.tasks, layout.Pending, layout.InProgress, c.t.ID); err != nil {
					return err
				}
			}
		}
		for _, c := range cs {
			for _, m := range c.msgs {
				if _, err := k.putMessageIn(g, m); err != nil {
					return err
				}
			}
		}
		k.crashHook(g, crashAfterCompletionMessage)
		for i, c := range cs {
			if events[i] != nil {
				if err := g.Put(k.events, layout.Completed, c.t.EventID, events[i]); err != nil {
					return err
				}
			}
			if err := g.Put(k.tasks, layout.Completed, c.t.ID, c.t); err != nil {
				return err
			}
		}
		for i, c := range cs {
			if events[i] != nil {
				if err := g.Remove(k.events, layout.Dispatched, c.t.EventID); err != nil {
					return err
				}
			}
			if err := g.Remove(k.tasks, layout.InProgress, c.t.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cs {
		// The outcome, emitted as the task's general.
		k.em.EmitAs(c.evType, c.t.TargetGeneral, c.data)
		k.log.Info("task finished", "task", c.t.ID, "general", c.t.TargetGeneral, "status", c.status)
	}
	return nil
}

// retryable is the error policy (seed 004, SPEC §4.4, §12.4): a failed or
// killed attempt (or one of an unknown status) runs again unless its
// reason is terminal or the task has used its retry.max_attempts. The
// breaker's kills go further, whatever the result says: a Runaway never
// runs again, and a Stalled runs again once (stalledBefore: an earlier
// attempt of the task stalled too).
func retryable(res *doc.Result, retryCount, maxAttempts int, stalledBefore bool) bool {
	switch res.Status {
	case doc.ResultSuccess, doc.ResultSkipped, doc.ResultNeedsHuman:
		return false
	}
	switch res.ErrorReason {
	case doc.ReasonRunaway:
		return false
	case doc.ReasonStalled:
		if stalledBefore {
			return false
		}
	}
	return !res.IsTerminal() && retryCount < maxAttempts
}

// stalledBefore reports, for a Stalled attempt of t, whether an earlier
// attempt of t stalled too. The spend ledger knows: every attempt is
// recorded there, with its error_reason, before it is acted on
// (recordAttempts). A ledger that cannot be read is an error (the result
// waits for a later tick); damaged entries are skipped.
func (k *King) stalledBefore(t *doc.Task, res *doc.Result) (bool, error) {
	if res.ErrorReason != doc.ReasonStalled || t.RetryCount == 0 {
		return false, nil
	}
	created, _ := doc.ParseTime(t.CreatedAt)
	var stalled bool
	var errs []error
	days := spend.StoreDays(k.kv)
	spend.TaskTotals(created, k.now(), 31, func(date string) spend.Totals {
		d, err := days.Load(k.ctx(), date)
		if err != nil && !errors.Is(err, spend.ErrDamaged) {
			errs = append(errs, err)
		}
		for _, e := range d.Attempts {
			if e.Task == t.ID && e.Attempt < t.RetryCount && e.ErrorReason == doc.ReasonStalled {
				stalled = true
			}
		}
		return spend.Totals{}
	})
	if stalled {
		return true, nil // whatever else could not be read
	}
	return false, errors.Join(errs...)
}

// backoff is the delay before attempt retryCount+1: backoff_seconds ·
// 2^retryCount, jittered, capped at max_backoff_seconds.
func backoff(r config.KingRetry, retryCount int, jitter func(time.Duration) time.Duration) time.Duration {
	base := time.Duration(r.BackoffSeconds) * time.Second
	maxB := time.Duration(r.MaxBackoffSeconds) * time.Second
	d := base
	for i := 0; i < retryCount && d < maxB; i++ {
		d *= 2
	}
	return min(jitter(d), maxB)
}

// retry re-queues a retryable failure (SPEC §9.1): rewrite the task inside
// in_progress/ with retry_count+1 and not_before, delete the old final
// result, rename to pending/ last.
func (k *King) retry(t *doc.Task, res *doc.Result) error {
	nb := k.now().Add(backoff(k.cfg.Retry, t.RetryCount, k.jitter))
	t.RetryCount++
	if err := k.reschedule(t, nb, map[string]any{"error_reason": res.ErrorReason}); err != nil {
		return err
	}
	k.countAttempt("", t) // a retry is an attempt of its item (breaker.go)
	k.log.Info("task retry scheduled", "task", t.ID, "retry_count", t.RetryCount, "not_before", t.NotBefore, "reason", res.ErrorReason)
	return nil
}

// reschedule re-queues t to run at nb: the task is rewritten inside
// in_progress/ with not_before and the retrying mark (what a crash leaves
// for processResults to finish), requeue does the rest, and
// task.retry_scheduled carries data plus the task's id, attempt, not_before
// and general. Both a retry and a usage-limit hold go through it.
func (k *King) reschedule(t *doc.Task, nb time.Time, data map[string]any) error {
	t.NotBefore = doc.FormatTime(nb)
	t.Status = doc.TaskRetrying
	if err := k.group(func(g *queue.GroupTx) error { return g.Put(k.tasks, layout.InProgress, t.ID, t) }); err != nil {
		return err
	}
	if err := k.requeue(t); err != nil {
		return err
	}
	data["task_id"], data["retry_count"], data["not_before"], data["general"] = t.ID, t.RetryCount, t.NotBefore, t.TargetGeneral
	k.em.Emit("task.retry_scheduled", data)
	return nil
}

// requeue finishes a retry whose task was already rewritten: the previous
// attempt's files go first (its raw result must never be taken for the next
// attempt's, SPEC §9.1), the final result last of them, then the task moves
// to pending/ — last, in one transaction fenced by the king's lease.
func (k *King) requeue(t *doc.Task) error {
	for _, p := range []string{k.l.ResultRaw(t.ID), k.l.ResultStaging(t.ID), k.l.ResultHeartbeat(t.ID),
		k.l.ResultSoldierID(t.ID)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove previous attempt's %s: %w", p, err)
		}
	}
	if err := k.kv.Delete(k.ctx(), kv.NSResults, t.ID); err != nil {
		return fmt.Errorf("remove previous attempt's final result: %w", err)
	}
	// The copy a general claims says pending, never retrying: a "retrying"
	// task in in_progress/ with no result is what processResults takes for a
	// stranded retry, and it would re-queue the task under its running
	// soldier. The pending copy and the removal of the in_progress/ one (which
	// keeps the retrying mark for a crash before this point) are one
	// transaction: a general claiming between a put and a remove would have
	// its claimed task removed (issue 33, a backoff of 0), and no claim can
	// run inside the transaction.
	p := *t
	p.Status = doc.TaskPending
	return k.group(func(g *queue.GroupTx) error {
		if err := g.Put(k.tasks, layout.Pending, p.ID, p); err != nil {
			return err
		}
		return g.Remove(k.tasks, layout.InProgress, t.ID)
	})
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// checkpoint is the checkpoint a needs_human attempt of task left (through
// the king's KV), nil when there is none or it does not decode.
func (k *King) checkpoint(task string) *doc.Checkpoint {
	b, err := k.kv.Get(k.ctx(), kv.NSCheckpoints, task)
	if err != nil || len(b) > queue.DefaultMaxSize {
		return nil
	}
	cp, err := schema.DecodeCheckpoint(b)
	if err != nil {
		return nil
	}
	return cp
}

// ranOn is the host that ran task's last attempt: the claim's holder
// while the task is claimed, else the host its general wrote into the
// final result or the checkpoint (a finish clears the claim).
func (k *King) ranOn(task string) string {
	if h := k.claimOf(task).Holder; h != "" {
		return h
	}
	var res doc.Result
	if kv.GetJSON(k.ctx(), k.kv, kv.NSResults, task, &res) == nil && res.Host != "" {
		return res.Host
	}
	if cp := k.checkpoint(task); cp != nil {
		return cp.Host
	}
	return ""
}
