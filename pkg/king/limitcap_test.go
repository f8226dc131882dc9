package king

import (
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A task whose every attempt ends on a usage limit is re-queued at most
// maxUsageLimitRequeues times; the next limit fails it for good with a ❌
// (a run that keeps reporting a limit must not loop without end).
func TestKing_UsageLimitRequeuesAreCapped(t *testing.T) {
	f := started(t)
	limit := func() {
		f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited",
			"error": "You've hit your limit", "resets_at": doc.FormatTime(f.clk.Now().Add(time.Minute))})
		f.tick()
	}
	for i := 1; i <= maxUsageLimitRequeues; i++ {
		limit()
		tk := f.task(layout.Pending, task1)
		eq(t, "usage_limits", tk.UsageLimits, i)
		eq(t, "retry_count kept", tk.RetryCount, 0)
		f.clk.Advance(2 * time.Minute)
		f.claim(task1)
	}
	limit()
	eqList(t, "completed", f.ids(layout.QTasks, layout.Completed), task1)
	eq(t, "status", f.task(layout.Completed, task1).Status, doc.ResultFailed)
	failed := f.internal("task.failed")
	if len(failed) != 1 || data(failed[0])["error_reason"] != any(doc.ReasonUsageLimited) || data(failed[0])["terminal"] != any(true) {
		t.Fatalf("task.failed events %v", failed)
	}
	m := f.message("msg-" + task1 + "-failed")
	if !strings.Contains(m.Content, "❌") || !strings.Contains(m.Content, "UsageLimited") ||
		!strings.Contains(m.Content, "usage limit 6 times") {
		t.Fatalf("failure message %q", m.Content)
	}
}

// A limit whose reset already passed (the result waited) re-queues the task
// to run now, without a zero-length pause or its system.rate_limited.
func TestKing_UsageLimitWithPastResetPausesNothing(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited",
		"error": "You've hit your limit", "resets_at": doc.FormatTime(t0.Add(-time.Minute))})
	f.tick()
	eq(t, "not_before now", f.task(layout.Pending, task1).NotBefore, doc.FormatTime(t0))
	eq(t, "system.rate_limited", len(f.internal("system.rate_limited")), 0)
	pf, err := enginepause.Load(t.Context(), kv.OnStore(f.st))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := pf["claude"]; ok {
		t.Errorf("a pause recorded for a past reset: %+v", p)
	}
}

// A result's resets_at far ahead (a misread, a hand-written result) holds
// the engine and the task at most enginepause.MaxPause.
func TestKing_UsageLimitResetBeyondTheCapIsClamped(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited",
		"error": "You've hit your limit", "resets_at": "2099-01-01T00:00:00Z"})
	f.tick()
	want := doc.FormatTime(t0.Add(enginepause.MaxPause))
	eq(t, "not_before at the cap", f.task(layout.Pending, task1).NotBefore, want)
	pf, err := enginepause.Load(t.Context(), kv.OnStore(f.st))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "paused until the cap", pf["claude"].Until, want)
}
