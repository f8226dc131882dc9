package king

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

const task1 = "task-20261121-001"

// started dispatches one event and lets its general claim the task.
func started(t *testing.T) *fixture {
	f := newFixture(t, genPR)
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)
	return f
}

func TestKing_ResultSuccessNotifiesProclaimsAndCompletes(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "LGTM, 2 nits",
		"notify_channel": "C-OPS", "proclamation": map[string]any{"channel": "C-TEAM", "message": "PR news"}})
	f.tick()

	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "tasks/in_progress", f.ids(layout.QTasks, layout.InProgress))
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-1")
	eq(t, "task status", f.task(layout.Completed, task1).Status, "completed")

	m := f.message("msg-" + task1 + "-done")
	eq(t, "type", m.Type, "notification")
	eq(t, "channel", m.Channel, "C-OPS")
	eq(t, "final", doc.Deref(m.Final), "done")
	if !strings.HasPrefix(m.Content, "✅") || !strings.Contains(m.Content, "LGTM, 2 nits") {
		t.Errorf("content %q", m.Content)
	}
	p := f.message("msg-" + task1 + "-proclamation")
	eq(t, "proclamation task_id", doc.Deref(p.TaskID), "proclamation-"+task1)
	eq(t, "proclamation channel", p.Channel, "C-TEAM")
	eq(t, "proclamation content", p.Content, "PR news")

	done := f.internal("task.completed")
	if len(done) != 1 {
		t.Fatalf("task.completed = %d, want 1", len(done))
	}
	eq(t, "actor", done[0].Actor, "gen-pr")
	eq(t, "status", data(done[0])["status"], any("success"))

	f.tick() // nothing more
	if n := len(f.internal("task.completed")); n != 1 {
		t.Errorf("task.completed after another tick = %d", n)
	}
}

func TestKing_ResultSkipped(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "skipped", "reason": "already reviewed"})
	f.tick()
	m := f.message("msg-" + task1 + "-skipped")
	eq(t, "final", doc.Deref(m.Final), "skipped")
	if !strings.HasPrefix(m.Content, "⏭️") || !strings.Contains(m.Content, "already reviewed") {
		t.Errorf("content %q", m.Content)
	}
	eq(t, "task status", f.task(layout.Completed, task1).Status, "skipped")
	eq(t, "task.completed", len(f.internal("task.completed")), 1)
}

func TestKing_ResultNeedsHumanAsksWithReplyContext(t *testing.T) {
	f := started(t)
	writeJSON(t, f.l.ResultCheckpoint(task1), map[string]any{"task_id": task1, "session_id": "sess-1",
		"workdir": "/w/gen-pr/tasks/" + task1, "thread": map[string]any{"channel": "C1", "thread_ts": "1700.1"},
		"question": "Which branch?", "general": "gen-pr", "repo": "acme/web"})
	f.finalResult(task1, map[string]any{"status": "needs_human", "question": "Which branch?", "session_id": "sess-1"})
	f.tick()
	m := f.message("msg-" + task1 + "-question")
	eq(t, "type", m.Type, "human_input_request")
	if m.ReplyContext == nil {
		t.Fatal("no reply_context")
	}
	rc := m.ReplyContext
	eq(t, "rc.general", rc.General, "gen-pr")
	eq(t, "rc.session_id", rc.SessionID, "sess-1")
	eq(t, "rc.repo", doc.Deref(rc.Repo), "acme/web")
	eq(t, "rc.task_id", rc.TaskID, task1)
	eq(t, "thread_ts", doc.Deref(m.ThreadTS), "1700.1")
	if !strings.Contains(m.Content, "Which branch?") {
		t.Errorf("content %q", m.Content)
	}
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eqList(t, "events/completed", f.ids(layout.QEvents, layout.Completed), "evt-1")
	nh := f.internal("task.needs_human")
	if len(nh) != 1 || nh[0].Actor != "gen-pr" {
		t.Fatalf("task.needs_human = %+v", nh)
	}
}

func TestKing_TerminalFailureNotRetried(t *testing.T) {
	for _, c := range []struct {
		reason   string
		terminal any
	}{
		{"Timeout", nil}, {"InvalidResult", nil}, {"EngineMissing", nil}, {"AgentFailed", nil},
		{"EngineError", true}, // retryable by default, marked terminal
	} {
		t.Run(c.reason, func(t *testing.T) {
			f := started(t)
			r := map[string]any{"status": "failed", "error": "boom", "error_reason": c.reason}
			if c.terminal != nil {
				r["terminal"] = c.terminal
			}
			f.finalResult(task1, r)
			f.tick()
			eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
			m := f.message("msg-" + task1 + "-failed")
			eq(t, "final", doc.Deref(m.Final), "failed")
			if !strings.HasPrefix(m.Content, "❌") {
				t.Errorf("content %q", m.Content)
			}
			fl := f.internal("task.failed")
			if len(fl) != 1 {
				t.Fatalf("task.failed = %d", len(fl))
			}
			eq(t, "error_reason", data(fl[0])["error_reason"], any(c.reason))
			eq(t, "retry_count", data(fl[0])["retry_count"], any(float64(0)))
			eq(t, "retries", len(f.internal("task.retry_scheduled")), 0)
		})
	}
}

func TestKing_RetryBackoffGrowsThenFinalFailure(t *testing.T) {
	f := started(t)
	f.cfg.Retry.MaxAttempts = 2
	wantNB := []time.Duration{60 * time.Second, 120 * time.Second}
	for attempt := range 2 {
		f.finalResult(task1, map[string]any{"status": "killed", "error": "session vanished",
			"error_reason": "SoldierDied", "retry_count": attempt})
		now := f.clk.Now()
		f.tick()
		eqList(t, "tasks/pending after retry", f.ids(layout.QTasks, layout.Pending), task1)
		tk := f.task(layout.Pending, task1)
		eq(t, "retry_count", tk.RetryCount, attempt+1)
		eq(t, "not_before", tk.NotBefore, doc.FormatTime(now.Add(wantNB[attempt])))
		if _, err := os.Stat(f.l.ResultFinal(task1)); !os.IsNotExist(err) {
			t.Errorf("old final result still there: %v", err)
		}
		rs := f.internal("task.retry_scheduled")
		eq(t, "retry_scheduled events", len(rs), attempt+1)
		eq(t, "event still dispatched", len(f.ids(layout.QEvents, layout.Dispatched)), 1)
		f.clk.Advance(wantNB[attempt])
		f.claim(task1)
	}
	// Third attempt (retry_count 2 = max_attempts) fails for good.
	f.finalResult(task1, map[string]any{"status": "failed", "error": "engine crashed",
		"error_reason": "EngineError", "retry_count": 2})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	m := f.message("msg-" + task1 + "-failed")
	if !strings.Contains(m.Content, "3 attempts") {
		t.Errorf("content %q", m.Content)
	}
	fl := f.internal("task.failed")
	if len(fl) != 1 {
		t.Fatalf("task.failed = %d", len(fl))
	}
	eq(t, "retry_count", data(fl[0])["retry_count"], any(float64(2)))
}

func TestBackoff_DoublesUpToTheCap(t *testing.T) {
	r := config.KingRetry{BackoffSeconds: 60, MaxBackoffSeconds: 300}
	none := func(d time.Duration) time.Duration { return d }
	for rc, want := range []time.Duration{60, 120, 240, 300, 300, 300} {
		eq(t, fmt.Sprintf("backoff after attempt %d", rc), backoff(r, rc, none), want*time.Second)
	}
	// Jitter never pushes the delay past the cap.
	double := func(d time.Duration) time.Duration { return 2 * d }
	eq(t, "jittered first backoff", backoff(r, 0, double), 120*time.Second)
	eq(t, "jittered backoff at the cap", backoff(r, 3, double), 300*time.Second)
	eq(t, "no backoff configured", backoff(config.KingRetry{}, 2, none), time.Duration(0))
}

func TestRetryable_ErrorPolicy(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name     string
		status   string
		reason   string
		terminal *bool
		attempt  int
		want     bool
	}{
		{"success is final", doc.ResultSuccess, "", nil, 0, false},
		{"skipped is final", doc.ResultSkipped, "", nil, 0, false},
		{"needs_human asks, never retries", doc.ResultNeedsHuman, "", nil, 0, false},
		{"soldier died: retried", doc.ResultFailed, doc.ReasonSoldierDied, nil, 0, true},
		{"engine error: retried", doc.ResultFailed, doc.ReasonEngineError, nil, 1, true},
		{"killed: retried", doc.ResultKilled, doc.ReasonSoldierDied, nil, 0, true},
		{"unknown status: retried", "weird", doc.ReasonEngineError, nil, 0, true},
		{"attempts used up", doc.ResultFailed, doc.ReasonSoldierDied, nil, 2, false},
		{"timeout is terminal", doc.ResultFailed, doc.ReasonTimeout, nil, 0, false},
		{"invalid result is terminal", doc.ResultFailed, doc.ReasonInvalidResult, nil, 0, false},
		{"engine missing is terminal", doc.ResultFailed, doc.ReasonEngineMissing, nil, 0, false},
		{"marked terminal by the result", doc.ResultFailed, doc.ReasonEngineError, &yes, 0, false},
		{"a first stall: retried", doc.ResultKilled, doc.ReasonStalled, nil, 1, true},
		{"a stall past the attempts", doc.ResultKilled, doc.ReasonStalled, nil, 2, false},
		{"runaway is terminal", doc.ResultKilled, doc.ReasonRunaway, nil, 0, false},
		{"runaway is terminal whatever the result says", doc.ResultKilled, doc.ReasonRunaway, &no, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &doc.Result{RawResult: doc.RawResult{Status: c.status, ErrorReason: c.reason, Terminal: c.terminal}}
			eq(t, "retryable", retryable(res, c.attempt, 2, false), c.want)
		})
	}
	// A second stall is terminal, even marked retryable; stalledBefore
	// says nothing about any other reason.
	second := &doc.Result{RawResult: doc.RawResult{Status: doc.ResultKilled, ErrorReason: doc.ReasonStalled, Terminal: &no}}
	eq(t, "second stall", retryable(second, 1, 5, true), false)
	other := &doc.Result{RawResult: doc.RawResult{Status: doc.ResultKilled, ErrorReason: doc.ReasonSoldierDied}}
	eq(t, "soldier died after a stall", retryable(other, 1, 5, true), true)
}

// A Stalled attempt runs again once (SPEC §12.4), whatever
// retry.max_attempts allows: the second is terminal. A stall after other
// failures is still a first.
func TestKing_StalledRetriedOnceThenTerminal(t *testing.T) {
	f := started(t)
	f.cfg.Retry.MaxAttempts = 5
	f.cfg.Retry.BackoffSeconds = 0
	for attempt, reason := range []string{doc.ReasonSoldierDied, doc.ReasonStalled} {
		f.finalResult(task1, map[string]any{"status": "killed", "error": "no progress",
			"error_reason": reason, "retry_count": attempt})
		f.tick()
		eqList(t, fmt.Sprintf("tasks/pending after a %s", reason), f.ids(layout.QTasks, layout.Pending), task1)
		f.claim(task1)
	}
	f.finalResult(task1, map[string]any{"status": "killed", "error": "no progress again",
		"error_reason": doc.ReasonStalled, "retry_count": 2})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eq(t, "retries", len(f.internal("task.retry_scheduled")), 2)
	fl := f.internal("task.failed")
	if len(fl) != 1 {
		t.Fatalf("task.failed = %d", len(fl))
	}
	eq(t, "error_reason", data(fl[0])["error_reason"], any(doc.ReasonStalled))
	eq(t, "retry_count", data(fl[0])["retry_count"], any(float64(2)))
	if m := f.message("msg-" + task1 + "-failed"); !strings.Contains(m.Content, "3 attempts") {
		t.Errorf("content %q", m.Content)
	}
}

// A Runaway attempt is never retried (SPEC §12.4), even when its result
// calls it retryable.
func TestKing_RunawayIsTerminal(t *testing.T) {
	f := started(t)
	f.cfg.Retry.MaxAttempts = 5
	f.finalResult(task1, map[string]any{"status": "killed", "error": "burned $12 without progress",
		"error_reason": doc.ReasonRunaway, "terminal": false})
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	eq(t, "retries", len(f.internal("task.retry_scheduled")), 0)
	fl := f.internal("task.failed")
	if len(fl) != 1 || data(fl[0])["error_reason"] != doc.ReasonRunaway {
		t.Fatalf("task.failed = %+v", fl)
	}
}

var outcomes = []any{
	map[string]any{"index": 0, "kind": "github.review", "state": "done", "link": "https://github.com/acme/web/pull/7#pullrequestreview-1"},
	map[string]any{"index": 1, "kind": "github.push", "state": "refused", "reason": "touches a protected path: .github/workflows/ci.yml"},
	map[string]any{"index": 2, "kind": "jira.comment", "state": "failed", "error": "jira: 503 Service Unavailable"},
}

const outcomeText = "\ngithub.review: https://github.com/acme/web/pull/7#pullrequestreview-1" +
	"\ngithub.push refused: touches a protected path: .github/workflows/ci.yml" +
	"\njira.comment failed: jira: 503 Service Unavailable"

// Each output's outcome (its link, the reason it was refused, its error)
// is in the task's thread and in task.completed (SPEC §12.3).
func TestKing_OutputOutcomesInTheThreadAndTheEvent(t *testing.T) {
	for _, c := range []struct {
		status, final, evType string
	}{
		{"success", "done", "task.completed"},
		{"failed", "failed", "task.failed"},
	} {
		t.Run(c.status, func(t *testing.T) {
			f := started(t)
			r := map[string]any{"status": c.status, "summary": "reviewed", "output_outcomes": outcomes}
			if c.status == "failed" {
				r["error"], r["error_reason"] = "gave up", doc.ReasonAgentFailed
			}
			f.finalResult(task1, r)
			f.tick()
			m := f.message("msg-" + task1 + "-" + c.final)
			if !strings.HasSuffix(m.Content, outcomeText) {
				t.Errorf("content %q, want it to end with %q", m.Content, outcomeText)
			}
			evs := f.internal(c.evType)
			if len(evs) != 1 {
				t.Fatalf("%s = %d", c.evType, len(evs))
			}
			got, _ := jsonMarshal(data(evs[0])["outputs"])
			want, _ := jsonMarshal(outcomes)
			eq(t, "outputs", string(got), string(want))
		})
	}
	// Without outputs, neither says anything of them.
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "summary": "LGTM"})
	f.tick()
	if m := f.message("msg-" + task1 + "-done"); strings.Contains(m.Content, "\n") {
		t.Errorf("content %q", m.Content)
	}
	if _, ok := data(f.internal("task.completed")[0])["outputs"]; ok {
		t.Error("task.completed has outputs")
	}
}

func TestKing_ResultOfAnotherAttemptIgnored(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success", "retry_count": 1})
	f.tick()
	eqList(t, "still in progress", f.ids(layout.QTasks, layout.InProgress), task1)
	eqList(t, "no messages but thread_start", f.ids(layout.QMessages, layout.Pending), "msg-"+task1+"-start")
}

func TestKing_UnusableFinalResultFailsTask(t *testing.T) {
	f := started(t)
	writeJSONRaw(t, f.l.ResultFinal(task1), `{"task_id": "`+task1+`", "status": "weird", "retry_count": 0}`)
	f.tick()
	eqList(t, "tasks/completed", f.ids(layout.QTasks, layout.Completed), task1)
	fl := f.internal("task.failed")
	if len(fl) != 1 || data(fl[0])["error_reason"] != "InvalidResult" {
		t.Fatalf("task.failed = %+v", fl)
	}
}

func TestKing_HalfDoneRetryIsFinished(t *testing.T) {
	f := started(t)
	// A king died after rewriting the task (retry_count 1) but before
	// deleting the old result and re-queueing.
	tk := f.task(layout.InProgress, task1)
	tk.RetryCount, tk.NotBefore = 1, doc.FormatTime(t0.Add(time.Minute))
	writeJSON(t, f.l.QueueState(layout.QTasks, layout.InProgress)+"/"+task1+".json", tk)
	f.finalResult(task1, map[string]any{"status": "killed", "error": "x", "error_reason": "SoldierDied", "retry_count": 0})
	f.tick()
	eqList(t, "re-queued", f.ids(layout.QTasks, layout.Pending), task1)
	eq(t, "retry_count kept", f.task(layout.Pending, task1).RetryCount, 1)
}

func TestKing_RetryStrandedAfterResultRemovalIsFinished(t *testing.T) {
	f := started(t)
	// A king died after rewriting the task for attempt 1 and deleting the
	// old final result, but before the rename to pending/: no result is
	// left to notice, only the task's retrying mark.
	tk := f.task(layout.InProgress, task1)
	tk.RetryCount, tk.NotBefore, tk.Status = 1, doc.FormatTime(t0.Add(time.Minute)), doc.TaskRetrying
	writeJSON(t, f.l.QueueState(layout.QTasks, layout.InProgress)+"/"+task1+".json", tk)
	writeJSON(t, f.l.ResultRaw(task1), map[string]any{"task_id": task1, "status": "killed", "summary": "x", "error": "x"})
	f.tick()
	eqList(t, "re-queued", f.ids(layout.QTasks, layout.Pending), task1)
	if _, err := os.Stat(f.l.ResultRaw(task1)); !os.IsNotExist(err) {
		t.Errorf("the previous attempt's raw result survived the re-queue: %v", err)
	}
	eq(t, "the claimable copy's status", f.task(layout.Pending, task1).Status, doc.TaskPending)
	// A task a general has just claimed, before it rewrote the status (the
	// file is the pending copy, renamed), is not touched: re-queueing it
	// under its running soldier would run the work twice.
	f.claim(task1)
	f.tick()
	eqList(t, "claimed task left alone", f.ids(layout.QTasks, layout.InProgress), task1)
	eqList(t, "nothing re-queued", f.ids(layout.QTasks, layout.Pending))
}
