package king

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// syncBuf is a log sink the test reads after the ticks.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// captureLog sends the king's Info lines to a buffer.
func (f *fixture) captureLog() *syncBuf {
	buf := &syncBuf{}
	f.k.log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return buf
}

func (f *fixture) waitsByID() map[string]waits.Wait {
	f.t.Helper()
	r, err := waits.Read(f.t.Context(), f.k.kv)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.ByID()
}

// A held event says why, with the figure, in the waits record; the operator
// hears of it (an Info line and event.waiting) once per change of reason,
// not once per tick; the record is not rewritten while nothing changes;
// once dispatched the event leaves the record.
func TestWaits_HeldEventSaysWhyOncePerChange(t *testing.T) {
	f := newFixture(t, genPR)
	logs := f.captureLog()
	writeResources := func(h string, mem float64) {
		r := &health.Resources{Timestamp: doc.FormatTime(f.clk.Now()), Health: h,
			System: health.SystemStats{CPUPercent: 10, MemoryPercent: mem}, Sessions: health.SessionStats{SoldiersMax: 3}}
		if err := health.Write(f.l.Resources(), r); err != nil {
			t.Fatal(err)
		}
	}
	writeResources(health.Orange, 91)
	f.event("evt-1", "github.pr.review_requested", "normal")
	for range 3 {
		f.tick()
	}
	w, ok := f.waitsByID()["evt-1"]
	if !ok {
		t.Fatal("evt-1 held by an orange health is not in the waits record")
	}
	eq(t, "reason", w.Reason, waits.Health)
	if !strings.Contains(w.Detail, "health orange") || !strings.Contains(w.Detail, "memory 91%") {
		t.Errorf("detail %q does not name the level and its figure", w.Detail)
	}
	eq(t, "since", w.Since.Equal(t0), true)
	evs := f.internal("event.waiting")
	if len(evs) != 1 {
		t.Fatalf("event.waiting emitted %d times over 3 ticks, want 1", len(evs))
	}
	eq(t, "event.waiting reason", data(evs[0])["reason"], any(waits.Health))
	eq(t, "event.waiting event_id", data(evs[0])["event_id"], any("evt-1"))
	eq(t, "Info lines over 3 ticks", logs.count("event waits"), 1)
	fi, err := os.Stat(waits.Path(f.l))
	if err != nil {
		t.Fatal(err)
	}
	// Unchanged ticks leave the record alone (its mtime is the proof; the
	// fake clock does not move files' times, so compare the content too).
	before, _ := os.ReadFile(waits.Path(f.l))
	f.tick()
	after, _ := os.ReadFile(waits.Path(f.l))
	fi2, _ := os.Stat(waits.Path(f.l))
	if !bytes.Equal(before, after) || !fi.ModTime().Equal(fi2.ModTime()) {
		t.Error("the waits record was rewritten by a tick that changed nothing")
	}

	// Health back to green but every slot taken: a new reason, told once.
	writeResources(health.Green, 20)
	f.cfg.Concurrency.MaxSoldiers = 0
	f.tick()
	f.tick()
	eq(t, "reason after the change", f.waitsByID()["evt-1"].Reason, waits.MaxSoldiers)
	eq(t, "event.waiting after a change of reason", len(f.internal("event.waiting")), 2)
	eq(t, "Info lines after a change of reason", logs.count("event waits"), 2)

	f.cfg.Concurrency.MaxSoldiers = 10
	f.tick()
	eqList(t, "dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	if _, ok := f.waitsByID()["evt-1"]; ok {
		t.Error("a dispatched event is still in the waits record")
	}
	if _, ok := f.k.held.told["evt-1"]; ok {
		t.Error("the king still remembers having told of a dispatched event's wait")
	}
}

// Below 80 % of the daily budget, a normal task whose task budget would
// pass what is left waits with reason task_budget and the figures, told once.
func TestWaits_TaskBudgetWaitNamesTheFigures(t *testing.T) {
	f := newFixture(t, genPR)
	f.cfg.Budget = spend.Budget{DailyUSD: fptr(10.00), TaskUSD: fptr(3.00)}
	f.newKing()
	logs := f.captureLog()
	today := spend.Date(f.clk.Now())
	f.spent(today, "task-20261121-900#0#s", spend.Entry{Task: "task-20261121-900", General: "gen-pr", Engine: "claude", CostUSD: fptr(7.50)})
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	f.tick()
	eqList(t, "pending", f.ids(layout.QEvents, layout.Pending), "evt-1")
	w := f.waitsByID()["evt-1"]
	eq(t, "reason", w.Reason, waits.TaskBudget)
	eq(t, "detail", w.Detail, "today $7.50 + this task's budget $3.00 would pass the daily $10.00")
	eq(t, "event.waiting", len(f.internal("event.waiting")), 1)
	eq(t, "Info lines", logs.count("would pass the daily $10.00"), 1)
}

// A task re-queued for a retry waits for its backoff, with until; a task
// whose general runs its max_concurrent waits for that.
func TestWaits_PendingTasksNameBackoffAndMaxConcurrent(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "failed", "error": "engine crashed", "error_reason": "EngineError"})
	f.tick()
	w, ok := f.waitsByID()[task1]
	if !ok {
		t.Fatal("a task waiting for its backoff is not in the waits record")
	}
	eq(t, "reason", w.Reason, waits.Backoff)
	nb, _ := doc.ParseTime(f.task(layout.Pending, task1).NotBefore)
	if w.Until == nil || !w.Until.Equal(nb) {
		t.Errorf("until = %v, want the task's not_before %s", w.Until, nb)
	}
	eq(t, "task.waiting", len(f.internal("task.waiting")), 1)

	// Past the backoff, with its general's one slot taken by another task.
	f.clk.Advance(time.Hour)
	writeJSON(t, f.l.QueueState(layout.QTasks, layout.InProgress)+"/task-20261121-050.json",
		doc.Task{ID: "task-20261121-050", EventID: "evt-x", TargetGeneral: "gen-pr", Type: "github.issue.assigned",
			Priority: "normal", CreatedAt: doc.FormatTime(t0), Status: doc.TaskInProgress})
	f.tick()
	w = f.waitsByID()[task1]
	eq(t, "reason", w.Reason, waits.MaxConcurrent)
	if !strings.Contains(w.Detail, "max_concurrent is 1") {
		t.Errorf("detail %q", w.Detail)
	}
}
