package king

import (
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// usageLimited handles an attempt stopped by a usage limit (SPEC §10.8):
// the engine is paused until the reset, the task goes back to pending/
// with not_before at the reset and the same retry_count (no attempt is
// counted), and system.rate_limited is emitted once per pause (none when
// the reset has already passed: the task just runs again). Each step is
// idempotent, so a repeat after a crash finishes the job without a second
// event.
func (k *King) usageLimited(t *doc.Task, res *doc.Result, m attemptMoney) error {
	if t.UsageLimits >= maxUsageLimitRequeues {
		return k.usageLimitedForGood(t, res)
	}
	now := k.now()
	until, err := doc.ParseTime(m.ResetsAt)
	if err != nil || !until.After(now) {
		if err == nil {
			// The reset passed while the result waited: run again now.
			until = now
		} else {
			until = now.Add(k.system().UsageLimitFallback())
		}
	}
	until = enginepause.Clamp(until, now) // a result's resets_at is outside input
	eng := k.engineOf(t.TargetGeneral)
	if until.After(now) { // a reset already past pauses nothing
		if err := k.pauseEngine(eng, until, res.Error, t.ID); err != nil {
			return err
		}
	}
	// A crash before the re-queue repeats this step and may count the
	// limit twice: the cap is a guard against a loop, one less is harmless.
	t.UsageLimits++
	if err := k.reschedule(t, until, map[string]any{
		"error_reason": doc.ReasonUsageLimited, "engine": eng, "attempt_counted": false,
	}); err != nil {
		return err
	}
	k.log.Info("task held by a usage limit", "task", t.ID, "engine", eng, "until", t.NotBefore)
	return nil
}

// maxUsageLimitRequeues caps the re-queues of one task for usage limits: a
// run that reports a limit every time (a misread reset, an engine that
// stays limited past its word) fails for good rather than loop forever.
const maxUsageLimitRequeues = 5

// usageLimitedForGood fails a task that hit a usage limit once more after
// maxUsageLimitRequeues re-queues: a terminal UsageLimited failure with its
// ❌. The engine is not paused again (the earlier pauses were recorded).
func (k *King) usageLimitedForGood(t *doc.Task, res *doc.Result) error {
	r := *res
	terminal := true
	r.Terminal = &terminal
	r.Error = fmt.Sprintf("stopped by a usage limit %d times; giving up (last: %s)", t.UsageLimits+1, redact.Clip(res.Error, 500))
	k.log.Warn("task failed: usage limit hit too often", "task", t.ID, "usage_limits", t.UsageLimits+1)
	return k.finish(t, &r, false)
}

// pauseEngine records engine's pause until `until` in engine-pause.json,
// extending a shorter one. A new pause (none was active) emits
// system.rate_limited; the file is written first, so a crash in between
// loses the event rather than doubling it (the chamberlain alerts from the
// file).
func (k *King) pauseEngine(engine string, until time.Time, reason, task string) error {
	now := k.now()
	pf, err := enginepause.Load(k.ctx(), k.kv)
	if err != nil {
		k.log.Warn("engine pauses unreadable; starting the file afresh", "err", err)
		pf = enginepause.File{}
	}
	cur, had := pf[engine]
	active := had && cur.UntilTime().After(now)
	if active && !until.After(cur.UntilTime()) {
		return nil // the same pause, recorded already
	}
	p := enginepause.Pause{Until: doc.FormatTime(until), Reason: redact.Clip(reason, 500), Since: doc.FormatTime(now), Task: task}
	if active {
		p.Since = cur.Since
	}
	pf[engine] = p
	if err := enginepause.Save(k.ctx(), k.kv, pf); err != nil {
		return fmt.Errorf("record the pause of engine %s: %w", engine, err)
	}
	if !active {
		k.em.Emit("system.rate_limited", map[string]any{"engine": engine, "until": p.Until, "reason": p.Reason, "task_id": task})
		k.log.Warn(fmt.Sprintf("engine %s paused by a usage limit until %s", engine, p.Until))
	}
	return nil
}

// finishAttempt acts on an attempt's result once its cost is recorded
// (recordAttempts): a usage limit pauses the engine and re-queues the
// task; anything else goes through finishInto (a task that ends joins cs).
func (k *King) finishAttempt(cs *[]completion, t *doc.Task, res *doc.Result, m attemptMoney) error {
	if res.ErrorReason == doc.ReasonUsageLimited && (res.Status == doc.ResultFailed || res.Status == doc.ResultKilled) {
		return k.usageLimited(t, res, m)
	}
	return k.finishInto(cs, t, res)
}
