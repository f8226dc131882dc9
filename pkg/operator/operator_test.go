package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

func TestStatus_ShowsPauseAndDiscardedCount(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	_, l, tc := newWatchdog(t, fakeBins(t), clock.NewFake(now), "gen-pr")
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "king", nil)
	em.Emit("event.discarded", map[string]any{"event_id": "evt-1", "reason": "no general subscribes to x"})
	em.Emit("event.dispatched", map[string]any{"event_id": "evt-2"})
	em.Emit("event.discarded", map[string]any{"event_id": "evt-3", "reason": "no general subscribes to y"})
	if err := atomicfile.WriteJSON(l.KingPaused(), control.Pause{Since: "2026-11-24T20:00:00Z", By: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(ctx, l, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st.Print(&out)
	for _, want := range []string{"PAUSED since 2026-11-24T20:00:00Z by alice@host", "events discarded (no general takes them) since the log's last daily split: 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTasks_ListsStateGeneralAttemptAgeCost(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	q := filesQueue(t, l, layout.QTasks)
	put := func(state, id string, created time.Time, retry int) {
		tk := doc.Task{ID: id, EventID: "evt-" + id, TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
			Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(created), Status: state, RetryCount: retry}
		if err := q.Put(state, id, tk); err != nil {
			t.Fatal(err)
		}
	}
	put(layout.Pending, "task-20261124-003", now.Add(-time.Minute), 0)
	put(layout.InProgress, "task-20261124-002", now.Add(-5*time.Minute), 1)
	put(layout.Completed, "task-20261124-001", now.Add(-time.Hour), 0)
	put(layout.Completed, "task-20261120-001", now.Add(-96*time.Hour), 0)
	atomicfile.WriteJSON(l.ResultFinal("task-20261124-001"), map[string]any{"task_id": "task-20261124-001", "cost_usd": 0.42, "error_reason": "Cancelled"})

	rows, err := ListTasks(t.Context(), filesShared(t, l), now, RecentWindow)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.ID+" "+r.State)
	}
	want := []string{"task-20261124-001 completed", "task-20261124-002 in_progress", "task-20261124-003 pending"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if r := rows[1]; r.Attempt != 2 || r.AgeSeconds != 300 || r.General != "gen-pr" {
		t.Errorf("in-progress row %+v", r)
	}
	if r := rows[0]; r.CostUSD == nil || *r.CostUSD != 0.42 || r.Reason != "Cancelled" {
		t.Errorf("completed row %+v", r)
	}
	all, _ := ListTasks(t.Context(), filesShared(t, l), now, 0)
	if len(all) != 4 {
		t.Errorf("--all rows = %d, want 4", len(all))
	}
	var out bytes.Buffer
	PrintTasks(&out, rows, nil)
	if !strings.Contains(out.String(), "$0.42") || !strings.Contains(out.String(), "(Cancelled)") {
		t.Errorf("table:\n%s", out.String())
	}
	b, _ := json.Marshal(rows)
	if !strings.Contains(string(b), `"attempt":2`) || !strings.Contains(string(b), `"cost_usd":null`) {
		t.Errorf("json %s", b)
	}
}

// A task's cost is its spend over every attempt, from the king's ledger.
func TestTasks_CostSumsTheLedgersAttempts(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Now()
	q := filesQueue(t, l, layout.QTasks)
	id := "task-20261124-009"
	q.Put(layout.InProgress, id, doc.Task{ID: id, EventID: "evt-9", TargetGeneral: "gen-pr", Type: "x",
		Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(now.Add(-time.Hour)), Status: "in_progress", RetryCount: 1})
	sh := filesShared(t, l)
	c1, c2 := 0.25, 0.5
	if _, err := spend.StoreDays(sh.KV).Open(t.Context(), spend.Date(now)).Record(
		[]string{spend.Key(id, 0, "a"), spend.Key(id, 1, "b"), spend.Key("task-20261124-010", 0, "c")},
		[]spend.Entry{{Task: id, Attempt: 0, CostUSD: &c1}, {Task: id, Attempt: 1, CostUSD: &c2}, {Task: "task-20261124-010", CostUSD: &c2}}); err != nil {
		t.Fatal(err)
	}
	rows, err := ListTasks(t.Context(), sh, now, RecentWindow)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if rows[0].CostUSD == nil || *rows[0].CostUSD != 0.75 {
		t.Fatalf("cost %v, want 0.75 over both attempts", rows[0].CostUSD)
	}
}

// A general's claim moves the task file without rewriting it: a task in
// in_progress/ whose file still says pending is shown in progress.
func TestTasks_AClaimedTaskIsInProgressWhateverItsFileSays(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	q := filesQueue(t, l, layout.QTasks)
	for id, status := range map[string]string{"task-20261124-001": doc.TaskPending, "task-20261124-002": doc.TaskRetrying} {
		tk := doc.Task{ID: id, EventID: "evt-" + id, TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
			Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(now), Status: status}
		if err := q.Put(layout.InProgress, id, tk); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := ListTasks(t.Context(), filesShared(t, l), now, RecentWindow)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.ID] = r.Status
	}
	if got["task-20261124-001"] != doc.TaskInProgress || got["task-20261124-002"] != doc.TaskRetrying {
		t.Fatalf("statuses %v: want the claimed one in_progress and the retrying one kept", got)
	}
}

// A cancelled task says who cancelled it (an operator, or slack:<user> from
// a button), in the table and in --json.
func TestTasks_CancelledSaysBy(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	q := filesQueue(t, l, layout.QTasks)
	const id = "task-20261124-001"
	tk := doc.Task{ID: id, EventID: "evt-1", TargetGeneral: "gen-pr", Type: "t", Payload: map[string]any{}, Priority: "normal",
		CreatedAt: doc.FormatTime(now.Add(-time.Minute)), Status: "failed"}
	if err := q.Put(layout.Completed, id, tk); err != nil {
		t.Fatal(err)
	}
	atomicfile.WriteJSON(l.ResultFinal(id), map[string]any{"task_id": id, "error_reason": "Cancelled"})
	sh := filesShared(t, l)
	if err := control.WriteCancelled(t.Context(), sh.KV, control.Cancelled{TaskID: id, Was: layout.InProgress, By: "slack:UHUMAN", At: doc.FormatTime(now)}); err != nil {
		t.Fatal(err)
	}
	rows, err := ListTasks(t.Context(), sh, now, RecentWindow)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if rows[0].CancelledBy != "slack:UHUMAN" {
		t.Errorf("cancelled_by %q, want slack:UHUMAN", rows[0].CancelledBy)
	}
	var out bytes.Buffer
	PrintTasks(&out, rows, nil)
	if !strings.Contains(out.String(), "(Cancelled by slack:UHUMAN)") {
		t.Errorf("table:\n%s", out.String())
	}
}
