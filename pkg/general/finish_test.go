package general

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// A timed-out attempt's raw result is the general's own (it has no usage);
// what the engine spent until the kill is in the soldier's -usage.json, and
// it reaches the final result and soldier.completed (SPEC §10.6).
func TestFinish_TimeoutTakesUsageAndCostFromTheSoldiersRecord(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	e.scenario("", map[string]any{"mode": "hang"})
	e.start()
	const id = "task-20260101-040"
	e.task(id)
	// The fake claude records its call once the soldier has started it, so
	// after the soldier cleared an earlier attempt's record; the soldier
	// keeps the record current while the engine runs (its spentRecord),
	// written here as it would be after the engine's first message.
	e.tickUntil("the engine to run", func() bool {
		_, err := os.Stat(filepath.Join(e.l.Base, "fake-calls", id+"-0.json"))
		return err == nil
	})
	cost := 0.0125
	spent := engine.Spent{Usage: &doc.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadInputTokens: 5000}, CostUSD: &cost}
	if err := engine.WriteSpent(e.l.ResultSpent(id), spent); err != nil {
		t.Fatal(err)
	}
	r := advanceUntilFinal(e, fc, id, nil)
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonTimeout {
		t.Fatalf("final = %+v, want a Timeout", r)
	}
	if r.Usage == nil || *r.Usage != *spent.Usage {
		t.Errorf("final usage = %+v, want %+v", r.Usage, *spent.Usage)
	}
	if r.CostUSD == nil || *r.CostUSD != cost {
		t.Errorf("final cost_usd = %v, want %v", r.CostUSD, cost)
	}
	evs := e.events("soldier.completed")
	if len(evs) != 1 {
		t.Fatalf("%d soldier.completed events, want 1", len(evs))
	}
	u, _ := evs[0]["usage"].(map[string]any)
	if evs[0]["cost_usd"] != cost || u["input_tokens"] != 1200.0 || u["output_tokens"] != 340.0 || u["cache_read_input_tokens"] != 5000.0 {
		t.Errorf("soldier.completed = %v, want the recorded usage and cost", evs[0])
	}
}

// On files too a final result is accepted only from the attempt holding
// the claim: the finish of an attempt a later one replaced writes nothing;
// as this host holds the later attempt, the task's files (named by the
// task, not the attempt) are the later attempt's and stay (issue 33). The
// holder's publish releases the claim.
func TestFinish_StaleAttemptOnFilesIsFenced(t *testing.T) {
	e := newEnv(t)
	e.start()
	const id = "task-20260101-041"
	cur := e.claimed(id, func(tk *doc.Task) { tk.RetryCount = 1 })
	stale := *cur
	stale.RetryCount = 0
	e.g.synthetic(id, doc.ResultFailed, doc.ReasonEngineError, "went wrong")
	e.g.finish(t.Context(), &stale, "", time.Now(), workspace{})
	if _, err := os.Stat(e.l.ResultFinal(id)); err == nil {
		t.Fatal("the stale attempt's final result was written")
	}
	if len(e.events("general.claim_lost")) != 1 {
		t.Error("the stale attempt was not dropped as lost")
	}
	if !exists(e.l.ResultRaw(id)) {
		t.Error("the stale attempt's cleanup removed the raw result of this host's newer attempt")
	}
	e.g.finish(t.Context(), cur, "", time.Now(), workspace{})
	if r := storedFinal(t, e, id); r == nil || r.RetryCount != 1 || r.Host != e.host {
		t.Fatalf("holder's final = %+v, want attempt 1 from %s", r, e.host)
	}
	if d, err := e.store().Get(t.Context(), layout.QTasks, id); err != nil || d.Claim != (store.Claim{}) {
		t.Errorf("after the holder's publish: claim %+v (%v), want it released", d.Claim, err)
	}
}
