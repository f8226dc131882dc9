package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// touchHeartbeats marks every role as having ticked just now.
func touchHeartbeats(t *testing.T, l layout.Layout, now time.Time) {
	t.Helper()
	for _, n := range append(append([]string{}, layout.CoreRoles...), "gen-pr") {
		os.MkdirAll(l.RoleStateDir(n), 0o700)
		if err := os.WriteFile(l.Heartbeat(n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(l.Heartbeat(n), now, now)
	}
}

// holdStart holds what a running kingdom holds: start's lock and the
// leader roles' leases (the fake role binaries take none).
func holdStart(t *testing.T, l layout.Layout) {
	t.Helper()
	lead, err := lockfile.TryLeader(l.LeaderLock(layout.RoleStart))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lead.Release() })
	st := filesShared(t, l).Store
	for _, r := range app.LeaderRoles {
		ls, err := st.Lead(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ls.Release() })
	}
}

// start status mirrors chamberlain --once's exit codes: 0 all up, 1 a
// general down, 2 a core role down; --json carries the same verdict.
func TestStatus_VerdictExitCodesAndJSONDocument(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	w, l, tc := newWatchdog(t, fakeBins(t), clock.NewFake(now), "gen-pr")
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	holdStart(t, l)
	touchHeartbeats(t, l, now)
	read := func() *Status {
		st, err := ReadStatus(ctx, l, tc, now)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if v := read().Verdict(); v.Exit != StatusOK {
		t.Fatalf("all up: verdict %+v, want exit 0", v)
	}
	if err := tc.Kill(ctx, "gen-pr"); err != nil {
		t.Fatal(err)
	}
	if v := read().Verdict(); v.Exit != StatusDegraded || len(v.Problems) != 1 || v.Problems[0].Role != "gen-pr" {
		t.Fatalf("general down: verdict %+v, want exit 1 naming gen-pr", v)
	}
	if err := tc.Kill(ctx, "king"); err != nil {
		t.Fatal(err)
	}
	st := read()
	var out bytes.Buffer
	st.Print(&out)
	if !strings.Contains(out.String(), "verdict: DOWN (exit 2)") || !strings.Contains(out.String(), "king down (no tmux session)") {
		t.Errorf("status screen lacks the verdict:\n%s", out.String())
	}
	b, err := json.Marshal(st.Document(now))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"roles", "queues", "soldiers", "health", "pause", "engine_pauses", "waits", "hosts", "verdict"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, b)
		}
	}
	if v := doc["verdict"].(map[string]any)["exit"]; v != 2.0 {
		t.Errorf("verdict.exit = %v, want 2", v)
	}
	if hs, ok := doc["hosts"].([]any); !ok || len(hs) != 1 || hs[0].(map[string]any)["this"] != true {
		t.Errorf("hosts = %v, want this host alone", doc["hosts"])
	}
	roles := map[string]map[string]any{}
	for _, r := range doc["roles"].([]any) {
		m := r.(map[string]any)
		roles[m["name"].(string)] = m
	}
	if roles["king"]["up"] != false || roles["envoy"]["up"] != true || roles["envoy"]["heartbeat_age_seconds"] != 0.0 || roles["envoy"]["session"] != "envoy" {
		t.Errorf("roles = %v", roles)
	}
}

// The Waiting section folds the king's record by reason.
func TestStatus_WaitingSectionGroupsByReason(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	_, l, tc := newWatchdog(t, fakeBins(t), clock.NewFake(now), "gen-pr")
	until := now.Add(90 * time.Minute)
	rec := waits.Record{UpdatedAt: now.Add(-3 * time.Second), Waits: []waits.Wait{
		{EventID: "evt-a", Reason: waits.MaxSoldiers, Detail: "every soldier slot is taken (3 of 3)", Since: now.Add(-time.Minute)},
		{EventID: "evt-b", Reason: waits.MaxSoldiers, Detail: "every soldier slot is taken (3 of 3)", Since: now.Add(-2 * time.Minute)},
		{EventID: "evt-c", Reason: waits.MaxSoldiers, Detail: "every soldier slot is taken (3 of 3)", Since: now},
		{TaskID: "task-20261124-004", Reason: waits.EnginePause, Detail: "codex hit its usage limit", Since: now, Until: &until},
	}}
	if err := waits.Write(t.Context(), filesShared(t, l).KV, rec); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(ctx, l, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st.Print(&out)
	for _, want := range []string{
		"Waiting (the king's record of 3s ago):",
		"max_soldiers: 3 events (evt-a, evt-b, evt-c) — every soldier slot is taken (3 of 3) (since " + clockTime(now.Add(-2*time.Minute), now) + ")",
		"engine_pause: task-20261124-004 — codex hit its usage limit (since " + clockTime(now, now) + ", until " + clockTime(until, now) + ")",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "max_soldiers"); n != 1 {
		t.Errorf("max_soldiers printed %d times, want one line for the reason", n)
	}
}

// start tasks names the event, the soldier's session, "attempt N" and why
// a pending task waits (a usage limit, until when).
func TestTasks_ShowEventSessionAttemptAndUsageLimitWait(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.Local)
	os.WriteFile(l.ConfigFile("system.yaml"), []byte("runtime:\n  engine: codex\n"), 0o600)
	q := filesQueue(t, l, layout.QTasks)
	put := func(state, id string, retry int, notBefore string) {
		tk := doc.Task{ID: id, EventID: "evt-" + id, TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
			Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(now.Add(-time.Minute)), Status: state,
			RetryCount: retry, NotBefore: notBefore}
		if err := q.Put(state, id, tk); err != nil {
			t.Fatal(err)
		}
	}
	reset := time.Date(2026, 11, 24, 8, 23, 0, 0, time.Local)
	put(layout.Pending, "task-20261124-001", 1, doc.FormatTime(reset))
	put(layout.InProgress, "task-20261124-002", 0, "")
	put(layout.Pending, "task-20261124-066", 0, "")
	if err := enginepause.Save(t.Context(), filesShared(t, l).KV, enginepause.File{"codex": {Until: doc.FormatTime(reset), Reason: "usage limit"}}); err != nil {
		t.Fatal(err)
	}
	sessions.New(l).Add(sessions.Entry{ID: "soldier-20261124-002-ab12", TaskID: "task-20261124-002", General: "gen-pr", StartedAt: now})

	rows, err := ListTasks(t.Context(), filesShared(t, l), now, RecentWindow)
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	by := map[string]TaskRow{}
	for _, r := range rows {
		by[r.ID] = r
	}
	if r := by["task-20261124-001"]; r.Waiting == nil || r.Waiting.Text != "codex usage limit until 08:23" || r.Attempt != 2 || r.RetryCount != 1 {
		t.Errorf("held row %+v (waiting %+v)", r, r.Waiting)
	}
	if r := by["task-20261124-002"]; r.Session != "soldier-20261124-002-ab12" || r.EventID != "evt-task-20261124-002" {
		t.Errorf("running row %+v", r)
	}
	if r := by["task-20261124-066"]; r.Waiting != nil {
		t.Errorf("a pending task nothing holds shows waiting %+v", r.Waiting)
	}
	var out bytes.Buffer
	PrintTasks(&out, rows, nil)
	for _, want := range []string{"waiting: codex usage limit until 08:23", "attempt 2", "soldier-20261124-002-ab12", "evt-task-20261124-001",
		"task ids are not dense (20261124: 63 of 1–66 not listed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// start events lists pending and petitioning events with the king's reason.
func TestEvents_ListWaitingEventsWithTheirReason(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	q := filesQueue(t, l, layout.QEvents)
	put := func(state, id, created string) {
		ev := doc.Event{ID: id, Type: "github.pr.review_requested", Source: "github", Priority: "normal", CreatedAt: created, Status: state}
		if err := q.Put(state, id, ev); err != nil {
			t.Fatal(err)
		}
	}
	put(layout.Pending, "evt-b", "2026-11-24T11:50:00Z")
	put(layout.Petitioning, "evt-a", "2026-11-24T11:40:00Z")
	put(layout.Dispatched, "evt-c", "2026-11-24T11:00:00Z")
	os.WriteFile(q.Dir(layout.Pending)+"/evt-bad.json", []byte("{not json"), 0o600)
	waits.Write(t.Context(), filesShared(t, l).KV, waits.Record{UpdatedAt: now, Waits: []waits.Wait{{EventID: "evt-b", Reason: waits.Health, Detail: "health orange admits only high priority", Since: now}}})

	rows, err := ListEvents(t.Context(), filesShared(t, l), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "evt-a" || rows[1].ID != "evt-b" {
		t.Fatalf("rows %+v, want evt-a (petitioning) then evt-b (pending)", rows)
	}
	if rows[1].Waiting == nil || rows[1].Waiting.Reason != waits.Health || rows[1].AgeSeconds != 600 || rows[1].Source != "github" {
		t.Errorf("evt-b row %+v", rows[1])
	}
	// The store sets poison aside wherever it meets it (store.Store).
	if _, err := os.Stat(q.Dir(layout.Rejected) + "/evt-bad.json"); err != nil {
		t.Errorf("a malformed event is not set aside: %v", err)
	}
	var out bytes.Buffer
	PrintEvents(&out, rows, now)
	if !strings.Contains(out.String(), "health: health orange admits only high priority") || !strings.Contains(out.String(), "a classifier picks its general") {
		t.Errorf("table:\n%s", out.String())
	}
}

// start restart stops a role's session; the watchdog's next round
// relaunches it. Unknown names, no start, and the crash-loop window refuse.
func TestRestart_StopsTheSessionAndTheWatchdogRelaunchesIt(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	w, l, tc := newWatchdog(t, fakeBins(t), clock.NewFake(now), "gen-pr")
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := RestartRole(ctx, l, tc, "gen-nope", time.Second, now.Add(2*time.Minute)); !errors.Is(err, ErrUnknownRole) {
		t.Fatalf("unknown role: err %v", err)
	}
	if _, err := RestartRole(ctx, l, tc, "gen-pr", time.Second, now.Add(2*time.Minute)); err == nil || !strings.Contains(err.Error(), "start is not running") {
		t.Fatalf("without start: err %v", err)
	}
	holdStart(t, l)
	if _, err := RestartRole(ctx, l, tc, "gen-pr", time.Second, now); err == nil || !strings.Contains(err.Error(), "crash-loop guard") {
		t.Fatalf("inside the crash-loop window: err %v", err)
	}
	old, err := RestartRole(ctx, l, tc, "gen-pr", time.Second, now.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sessionNames(t, tc)["gen-pr"]; ok {
		t.Fatal("gen-pr still has a session after restart")
	}
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	s, ok := WaitRelaunch(ctx, tc, "gen-pr", old, 60*time.Second)
	if !ok || s.PID == old.PID {
		t.Fatalf("not relaunched: %+v (old pid %d)", s, old.PID)
	}
}
