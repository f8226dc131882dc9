package general

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
)

func ptr[T any](v T) *T { return &v }

// brakesAt is a brakes over a fresh worktree and spent record.
func brakesAt(t *testing.T, b config.KingBreaker, now time.Time) (br *brakes, workdir, spent string) {
	t.Helper()
	dir := t.TempDir()
	workdir, spent = filepath.Join(dir, "repo"), filepath.Join(dir, "usage.json")
	if err := os.MkdirAll(filepath.Join(workdir, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	return newBrakes(b, workdir, spent, now), workdir, spent
}

func writeSpent(t *testing.T, path string, tokens int64, usd *float64) {
	t.Helper()
	if err := engine.WriteSpent(path, engine.Spent{Usage: &doc.Usage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2}, CostUSD: usd}); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(at.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// No progress: silence for no_progress_minutes stops the attempt; an
// engine event or a change in the worktree (not in .git) is progress.
func TestBrakes_NoProgress(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b, wd, _ := brakesAt(t, config.KingBreaker{NoProgressMinutes: 20}, t0)
	at := func(d time.Duration, event bool) string {
		r, _ := b.check(t0.Add(d), event)
		return r
	}
	if r := at(0, true); r != "" {
		t.Fatalf("at the start: %s", r)
	}
	if r := at(19*time.Minute, false); r != "" {
		t.Fatalf("19 silent minutes: %s", r)
	}
	if r := at(19*time.Minute+30*time.Second, true); r != "" { // an engine event
		t.Fatalf("after an event: %s", r)
	}
	if r := at(39*time.Minute, false); r != "" {
		t.Fatalf("19.5 minutes after the event: %s", r)
	}
	// git's own writes are not progress; the agent's are, even when the
	// watcher's last walk was moments ago (the brake walks before firing).
	touch(t, filepath.Join(wd, ".git", "index"), t0.Add(39*time.Minute))
	touch(t, filepath.Join(wd, "main.go"), t0.Add(39*time.Minute))
	if r := at(39*time.Minute+30*time.Second, false); r != "" {
		t.Fatalf("after a worktree change: %s", r)
	}
	touch(t, filepath.Join(wd, ".git", "index"), t0.Add(50*time.Minute))
	r, msg := b.check(t0.Add(59*time.Minute+30*time.Second), false)
	if r != doc.ReasonStalled {
		t.Fatalf("20 minutes without progress (a .git write only): %q, want Stalled", r)
	}
	if !strings.Contains(msg, "20 minutes") || !strings.Contains(msg, "no_progress_minutes 20") {
		t.Errorf("message %q does not name the minutes", msg)
	}
}

// Burn: cost and tokens since the last worktree change (or the start),
// past the caps, stop the attempt; engine events do not reset it.
func TestBrakes_Burn(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b, wd, spent := brakesAt(t, config.KingBreaker{BurnUSD: ptr(1.0), BurnTokens: ptr(int64(100_000))}, t0)
	now := t0
	step := func(tokens int64, usd *float64) (string, string) {
		now = now.Add(40 * time.Second) // each check walks the worktree
		writeSpent(t, spent, tokens, usd)
		return b.check(now, true)
	}
	if r, msg := step(90_000, ptr(0.9)); r != "" {
		t.Fatalf("under both caps: %s %s", r, msg)
	}
	// The agent changed something: the burn counts from here.
	touch(t, filepath.Join(wd, "a.txt"), now)
	if r, msg := step(95_000, ptr(0.95)); r != "" {
		t.Fatalf("after a change: %s %s", r, msg)
	}
	r, msg := step(100_000+95_000+1, ptr(1.2))
	if r != doc.ReasonRunaway || !strings.Contains(msg, "100001 tokens") || !strings.Contains(msg, "burn_tokens 100000") {
		t.Fatalf("tokens past the cap since the change: %q %q, want Runaway naming 100001 of 100000", r, msg)
	}
	// Dollars, when the engine priced its usage.
	b, _, spent = brakesAt(t, config.KingBreaker{BurnUSD: ptr(1.0)}, t0)
	writeSpent(t, spent, 10, ptr(1.5))
	if r, msg := b.check(t0.Add(time.Second), true); r != doc.ReasonRunaway || !strings.Contains(msg, "$1.50") || !strings.Contains(msg, "burn_usd $1.00") {
		t.Fatalf("dollars past the cap: %q %q", r, msg)
	}
	// Unpriced usage never trips the dollar cap; no caps, no brakes.
	b, _, spent = brakesAt(t, config.KingBreaker{BurnUSD: ptr(1.0)}, t0)
	writeSpent(t, spent, 1_000_000_000, nil)
	if r, _ := b.check(t0.Add(time.Second), true); r != "" {
		t.Fatalf("unpriced usage: %s", r)
	}
	b, _, spent = brakesAt(t, config.KingBreaker{}, t0)
	writeSpent(t, spent, 1_000_000_000, ptr(1e6))
	if r, _ := b.check(t0.Add(time.Hour), false); r != "" {
		t.Fatalf("no breaker: %s", r)
	}
}

// A command soldier that prints nothing and changes nothing is killed at
// the no-progress limit with Stalled (its session and its agent too);
// one that prints, or one that changes its worktree, runs on to its
// timeout.
func TestGeneral_NoProgressStallsASilentSoldier(t *testing.T) {
	for _, c := range []struct {
		name, script, reason string
		min, max             float64
	}{
		{"silent", "sleep 600\n", doc.ReasonStalled, 60, 90},
		{"printing", "while :; do echo working; sleep 0.01; done\n", doc.ReasonTimeout, 200, 230},
		// It touches DIR/beat after each edit: the sign of life the clock waits for.
		{"editing", "while :; do date +%s%N > progress.txt; touch DIR/beat; sleep 0.01; done\n", doc.ReasonTimeout, 100, 130},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := clock.NewFake(time.Now())
			e := newEnv(t, withClock(fc))
			e.brk = config.KingBreaker{NoProgressMinutes: 1}
			dir := t.TempDir()
			withAgentScript(t, e, fmt.Sprintf("echo $$ > %s/agent.pid\n%s", dir, strings.ReplaceAll(c.script, "DIR", dir)))
			e.start()
			const id = "task-20260101-040"
			e.task(id)
			var alive func() string
			switch c.name {
			case "printing":
				alive = mtimeOf(e.l.ResultHeartbeat(id))
			case "editing":
				alive = mtimeOf(filepath.Join(dir, "beat"))
			}
			r := advanceUntilFinal(e, fc, id, alive)
			if r.Status != doc.ResultFailed || r.ErrorReason != c.reason {
				t.Fatalf("final = %s/%s (%s), want failed/%s", r.Status, r.ErrorReason, r.Error, c.reason)
			}
			if r.DurationSeconds < c.min || r.DurationSeconds > c.max {
				t.Errorf("duration %.0f s, want %.0f–%.0f", r.DurationSeconds, c.min, c.max)
			}
			if c.reason != doc.ReasonStalled {
				return
			}
			if !strings.Contains(r.Error, "1 minutes") || r.IsTerminal() {
				t.Errorf("error %q (terminal %v): want the minutes named, retryable", r.Error, r.IsTerminal())
			}
			awaitDead(t, "the agent", readPID(filepath.Join(dir, "agent.pid")))
			if s := e.soldierSessions(); len(s) != 0 {
				t.Errorf("soldier sessions left: %v", s)
			}
			if ev := e.events("soldier.killed"); len(ev) != 1 || ev[0]["reason"] != doc.ReasonStalled {
				t.Errorf("soldier.killed events %v", ev)
			}
		})
	}
}

// A claude soldier whose model keeps calling tools, changing nothing, is
// stopped by the burn cap from claude's per-message usage: Runaway,
// terminal, naming the figure and the limit, with what it spent.
func TestGeneral_BurnStopsARunawaySoldier(t *testing.T) {
	e := newEnv(t)
	e.brk = config.KingBreaker{NoProgressMinutes: 20, BurnTokens: ptr(int64(20_000))}
	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	body := fmt.Sprintf(`#!/bin/sh
echo $$ > %s/agent.pid
echo '{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}'
i=0
while :; do
  i=$((i+1))
  echo '{"type":"assistant","message":{"id":"msg_'$i'","usage":{"input_tokens":1000,"output_tokens":1000},"content":[{"type":"tool_use","name":"Bash"}]}}'
  sleep 0.02
done
`, dir)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	e.sys.Runtime.Claude.Command = script
	e.start()
	const id = "task-20260101-041"
	e.task(id)
	r := e.final(id)
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonRunaway || !r.IsTerminal() {
		t.Fatalf("final = %s/%s terminal=%v (%s), want failed/Runaway terminal", r.Status, r.ErrorReason, r.IsTerminal(), r.Error)
	}
	if !strings.Contains(r.Error, "burn_tokens 20000") || !strings.Contains(r.Error, " tokens since its last progress") {
		t.Errorf("error %q does not name the figure and the limit", r.Error)
	}
	if r.Usage == nil || r.Usage.InputTokens+r.Usage.OutputTokens <= 20_000 {
		t.Errorf("usage %+v: want what the engine spent", r.Usage)
	}
	awaitDead(t, "the agent", readPID(filepath.Join(dir, "agent.pid")))
	if alive, _ := tmuxC.Has(context.Background(), r.SoldierID); alive {
		t.Errorf("soldier session %s alive", r.SoldierID)
	}
}
