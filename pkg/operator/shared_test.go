package operator

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// pgHost is one host's base dir in a PostgreSQL cluster: system.yaml names
// store.kind postgres and the host id; the DSN is in KINGDOM_TEST_DSN.
func pgHost(t *testing.T, host string) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := "store:\n  kind: postgres\n  dsn_env: KINGDOM_TEST_DSN\n  host_id: " + host + "\n"
	if err := os.WriteFile(l.ConfigFile(config.SystemFile), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// seedCluster puts, on host h1's store: a task h1 claimed (in progress),
// one it finished (its host only in the final result), a pending one and
// a pending event held by the king's waits record, and the operator's
// pause. It returns the shared state as h1 sees it.
func seedCluster(t *testing.T, now time.Time) (*Shared, layout.Layout) {
	t.Helper()
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t))
	t.Setenv(config.HostIDEnv, "")
	l1 := pgHost(t, "h1")
	ctx := t.Context()
	h1, err := OpenShared(ctx, l1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h1.Close)
	if h1.Store == nil {
		t.Fatal("store.kind postgres opened no store")
	}
	tasks := h1.Queues[layout.QTasks]
	put := func(id string, created time.Time) {
		tk := doc.Task{ID: id, EventID: "evt-" + id, TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
			Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(created), Status: layout.Pending}
		if err := tasks.PutOnce(layout.Pending, id, tk); err != nil {
			t.Fatal(err)
		}
	}
	put("task-20261124-001", now.Add(-time.Hour))
	put("task-20261124-002", now.Add(-5*time.Minute))
	put("task-20261124-003", now.Add(-time.Minute))
	for _, id := range []string{"task-20261124-001", "task-20261124-002"} {
		if err := tasks.ClaimAs(layout.Pending, layout.InProgress, id, store.Claim{Holder: "h1"}); err != nil {
			t.Fatal(err)
		}
	}
	// The general's finish clears the claim: the host is the result's.
	if err := tasks.FinishAs(layout.InProgress, layout.Completed, "task-20261124-001", store.Claim{Holder: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := kv.PutJSON(ctx, h1.KV, kv.NSResults, "task-20261124-001", map[string]any{
		"task_id": "task-20261124-001", "status": "success", "cost_usd": 0.25, "host": "h1"}); err != nil {
		t.Fatal(err)
	}
	ev := doc.Event{ID: "evt-inbox-1", Type: "github.pr.review_requested", Source: "github", Priority: "low",
		CreatedAt: doc.FormatTime(now.Add(-2 * time.Minute)), Payload: map[string]any{}}
	if err := h1.Queues[layout.QEvents].PutOnce(layout.Pending, ev.ID, ev); err != nil {
		t.Fatal(err)
	}
	rec := waits.Record{UpdatedAt: now, Waits: []waits.Wait{{EventID: ev.ID, Reason: waits.Pause, Detail: "the operator paused admission", Since: now}}}
	if err := waits.Write(ctx, h1.KV, rec); err != nil {
		t.Fatal(err)
	}
	if err := control.WritePause(ctx, h1.KV, control.Pause{Since: "2026-11-24T19:00:00Z", By: "alice@h1"}); err != nil {
		t.Fatal(err)
	}
	return h1, l1
}

// `start tasks` on host h2 lists what every host shares: the task h1 runs
// and the one it ran, each with host h1; its own base dir holds no queue.
func TestSharedPostgres_TasksFromAnotherHostNameTheirHost(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	seedCluster(t, now)
	l2 := pgHost(t, "h2")
	h2, err := OpenShared(t.Context(), l2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	rows, err := ListTasks(t.Context(), h2, now, RecentWindow)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]TaskRow{}
	for _, r := range rows {
		got[r.ID] = r
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	if r := got["task-20261124-002"]; r.State != layout.InProgress || r.Host != "h1" {
		t.Errorf("running task %+v, want in_progress on h1", r)
	}
	if r := got["task-20261124-001"]; r.State != layout.Completed || r.Host != "h1" || r.CostUSD == nil || *r.CostUSD != 0.25 {
		t.Errorf("finished task %+v, want completed on h1 costing $0.25", r)
	}
	if r := got["task-20261124-003"]; r.State != layout.Pending || r.Host != "" {
		t.Errorf("pending task %+v, want no host", r)
	}
	var out bytes.Buffer
	if err := PrintTasks(&out, rows, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "HOST") || !strings.Contains(out.String(), "gen-pr   h1") {
		t.Errorf("table lacks the host column:\n%s", out.String())
	}
	evs, err := ListEvents(t.Context(), h2, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Waiting == nil || evs[0].Waiting.Reason != waits.Pause {
		t.Errorf("events on h2 %+v, want evt-inbox-1 held by the pause (the king's record in the store)", evs)
	}
	if ents, _ := os.ReadDir(filepath.Join(l2.Base, "queue", layout.QTasks, layout.InProgress)); len(ents) != 0 {
		t.Errorf("h2's base dir holds task files: %v", ents)
	}
}

// `start status` on h2 counts the shared queues and shows the pause set
// on the store, not h2's empty files.
func TestSharedPostgres_StatusFromAnotherHostShowsSharedQueuesAndPause(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	seedCluster(t, now)
	l2 := pgHost(t, "h2")
	tc := &tmux.Client{Socket: "kingdom-shared-test-none"}
	st, err := ReadStatus(context.Background(), l2, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	if q := st.Queues[layout.QTasks]; q[layout.Pending] != 1 || q[layout.InProgress] != 1 || q[layout.Completed] != 1 {
		t.Errorf("task depths %v, want pending 1, in_progress 1, completed 1", q)
	}
	if n := st.Queues[layout.QEvents][layout.Pending]; n != 1 {
		t.Errorf("events pending %d, want 1", n)
	}
	if st.Paused == nil || st.Paused.By != "alice@h1" {
		t.Errorf("pause %+v, want alice@h1's", st.Paused)
	}
	var out bytes.Buffer
	st.Print(&out)
	for _, want := range []string{"pending=1 in_progress=1 completed=1", "PAUSED since 2026-11-24T19:00:00Z by alice@h1", "pause: evt-inbox-1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// A database that cannot be reached leaves the shared parts unknown with
// the reason; the status is still read.
func TestSharedPostgres_UnreachableStoreSaysSo(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", "")
	l := pgHost(t, "h2")
	if _, err := OpenShared(t.Context(), l); err == nil || !strings.Contains(err.Error(), "KINGDOM_TEST_DSN is not set") {
		t.Fatalf("open without a DSN: %v", err)
	}
	st, err := ReadStatus(t.Context(), l, &tmux.Client{Socket: "kingdom-shared-test-none"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st.Print(&out)
	if st.QueuesErr == nil || !strings.Contains(out.String(), "warning: queues:") || !strings.Contains(out.String(), "waiting: unknown") {
		t.Errorf("status without its database:\n%s", out.String())
	}
}

// With store.kind files the shared state is the files store of the base
// dir: what a role puts in the queue files, the operator's listing sees.
func TestShared_FileModeIsTheBaseDir(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sh, err := OpenShared(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	task := doc.Task{ID: "task-20261124-001", EventID: "evt-1", TargetGeneral: "gen-pr", Type: "x", Payload: map[string]any{},
		Priority: "normal", CreatedAt: doc.FormatTime(time.Now()), Status: doc.TaskPending}
	if err := filesQueue(t, l, layout.QTasks).Put(layout.Pending, task.ID, task); err != nil {
		t.Fatal(err)
	}
	if ids, _ := sh.Queues[layout.QTasks].IDs(layout.Pending); len(ids) != 1 {
		t.Errorf("file mode's queue sees %v", ids)
	}
	rows, err := ListTasks(t.Context(), sh, time.Now(), 0)
	if err != nil || len(rows) != 1 || rows[0].ID != "task-20261124-001" {
		t.Fatalf("tasks %+v, %v", rows, err)
	}
}

// filesShared is the shared state of a one-machine installation at l: its
// files store, closed with the test.
func filesShared(t testing.TB, l layout.Layout) *Shared {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return StoreShared(l, st)
}

// filesQueue is the queue of kind as a role on this machine writes it: on
// its own files store of l (another process's), closed with the test.
func filesQueue(t testing.TB, l layout.Layout, kind string) *queue.Queue {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return queue.OnStore(st, l, kind, nil, "test-host")
}
