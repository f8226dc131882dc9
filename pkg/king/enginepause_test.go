package king

import (
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// An operator lifts an engine's usage-limit pause: `start resume` lifts it
// and says which (with the reset it was waiting for), the held task runs
// now, the held event is admitted; `start resume --engine E` lifts one
// engine's alone.
func TestControl_ResumeLiftsAnEnginePause(t *testing.T) {
	f := newFixture(t, genPRIssues, genCodex)
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.claim(task1)
	reset := t0.Add(3 * time.Hour)
	f.finalResult(task1, map[string]any{"status": "failed", "error_reason": "UsageLimited", "error": "limit",
		"resets_at": doc.FormatTime(reset), "soldier_id": "soldier-a-x"})
	f.tick()
	f.event("evt-2", "github.pr.review_requested", "normal")
	f.tick()
	eqList(t, "held by the pause", f.ids(layout.QEvents, layout.Pending), "evt-2")
	by := f.waitsByID()
	eq(t, "task wait", by[task1].Reason, waits.EnginePause)
	eq(t, "event wait", by["evt-2"].Reason, waits.EnginePause)
	if u := by[task1].Until; u == nil || !u.Equal(reset) {
		t.Errorf("task wait until = %v, want %s", u, reset)
	}

	if rep := f.request(control.Request{Action: control.ActionResume, Engine: "codex", By: "alice"}); !rep.OK || rep.Message != "engine codex is not paused" {
		t.Fatalf("resume --engine codex %+v", rep)
	}
	rep := f.request(control.Request{Action: control.ActionResume, By: "alice"})
	if !rep.OK || rep.Message != "lifted the claude usage-limit pause (was until 13:00 UTC)" {
		t.Fatalf("resume reply %+v", rep)
	}
	pf, err := enginepause.Load(t.Context(), kv.OnStore(f.st))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pf.Active("claude", f.clk.Now()); ok {
		t.Error("claude still paused after resume")
	}
	tk := f.task(layout.Pending, task1)
	if nb, _ := doc.ParseTime(tk.NotBefore); nb.After(f.clk.Now()) {
		t.Errorf("the held task still waits until %s", tk.NotBefore)
	}
	eq(t, "attempt not counted", tk.RetryCount, 0)
	f.tick()
	eqList(t, "events admitted after the lift", f.ids(layout.QEvents, layout.Pending))
	if _, ok := f.waitsByID()[task1]; ok {
		t.Error("the released task still waits")
	}
	eq(t, "system.engine_resumed", len(f.internal("system.engine_resumed")), 1)
	if rep := f.request(control.Request{Action: control.ActionResume, By: "alice"}); rep.Message != "not paused" {
		t.Errorf("second resume %+v", rep)
	}
}
