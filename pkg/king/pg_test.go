package king

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// pgHost is one host of a PostgreSQL-mode cluster: its own base dir and
// store handle on the shared database, and its king.
type pgHost struct {
	t   *testing.T
	id  string
	l   layout.Layout
	st  *pg.Store
	k   *King
	cfg *config.King
}

func newPGHost(t *testing.T, dsn, id string, clk clock.Clock, manifests ...string) *pgHost {
	t.Helper()
	st, err := pg.Open(t.Context(), dsn, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		name := strings.TrimSpace(strings.SplitN(strings.SplitN(m, "name: ", 2)[1], "\n", 2)[0])
		if err := os.WriteFile(l.GeneralManifest(name), []byte(m), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.DefaultKing()
	cfg.Concurrency.MaxSoldiers = 1000
	h := &pgHost{t: t, id: id, l: l, st: st, cfg: cfg}
	k, err := New(Options{
		Layout: l, Store: st, Host: id, Config: cfg, Clock: clk, Location: time.UTC,
		Events:          eventlog.NewStoreEmitter(st, "king"),
		PetitionCommand: []string{l.Base + "/no-such-classifier"},
		Jitter:          func(d time.Duration) time.Duration { return d },
		Takeover:        time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	return h
}

func (h *pgHost) lead() store.Lease {
	h.t.Helper()
	l, err := h.st.Lead(h.t.Context(), "king")
	if err != nil {
		h.t.Fatalf("%s lead: %v", h.id, err)
	}
	h.t.Cleanup(func() { l.Release() })
	h.k.UseLease(l)
	return l
}

func (h *pgHost) admit(id, typ, prio string, created time.Time, payload map[string]any) {
	h.t.Helper()
	if payload == nil {
		payload = map[string]any{}
	}
	ev := doc.Event{ID: id, Type: typ, Source: doc.SourceGitHub, Priority: prio, Payload: payload,
		CreatedAt: doc.FormatTime(created), Status: doc.EventPending}
	if strings.HasPrefix(typ, "slack.") {
		ev.Source = doc.SourceSlack // as the envoy admits it
	}
	b, err := json.Marshal(ev)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.st.Admit(h.t.Context(), id, b); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pgHost) docs(q, state string) []store.Doc {
	h.t.Helper()
	ds, err := h.st.List(h.t.Context(), q, state)
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func (h *pgHost) tick() {
	h.t.Helper()
	if err := h.k.Tick(h.t.Context()); err != nil {
		h.t.Fatalf("%s tick: %v", h.id, err)
	}
}

func (h *pgHost) task(id string) doc.Task {
	h.t.Helper()
	d, err := h.st.Get(h.t.Context(), layout.QTasks, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var t doc.Task
	if err := json.Unmarshal(d.Data, &t); err != nil {
		h.t.Fatal(err)
	}
	return t
}

// renewed records host id in the hosts registry, renewed age ago.
func renewed(t *testing.T, st *pg.Store, id string, age time.Duration) {
	t.Helper()
	if err := st.RenewHost(t.Context(), id, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(t.Context(), "UPDATE hosts SET renewed_at = now() - make_interval(secs => $2) WHERE host_id=$1",
		id, age.Seconds()); err != nil {
		t.Fatal(err)
	}
}

// Two kings on one database: only the lease holder dispatches, and 200
// events become exactly 200 tasks while the leadership moves from one king
// to the other in the middle of the first one's tick (its later dispatches
// are fenced and roll back whole).
func TestPG_TwoKingsDispatchEachEventOnceAcrossAFailover(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	b := newPGHost(t, dsn, "host-b", clk, genPR)
	const n = 200
	for i := range n {
		a.admit(fmt.Sprintf("evt-%03d", i), "github.pr.review_requested", "normal", t0.Add(time.Duration(i)*time.Millisecond), nil)
	}
	leaseA := a.lead()
	if _, err := b.st.Lead(t.Context(), "king"); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("second king took the held leadership: %v", err)
	}

	var wg sync.WaitGroup
	var tickErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tickErr = a.k.Tick(context.Background())
	}()
	// Let the first king dispatch part of the backlog, then take its
	// leadership away while its tick still runs.
	deadline := time.Now().Add(60 * time.Second)
	for len(b.docs(layout.QTasks, layout.Pending)) < n/4 {
		if time.Now().After(deadline) {
			t.Fatal("the first king dispatched nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := leaseA.Release(); err != nil {
		t.Fatal(err)
	}
	b.lead()
	b.tick()
	wg.Wait()
	if moved := len(b.docs(layout.QTasks, layout.Pending)); moved == n && tickErr == nil {
		t.Log("the first king finished its tick before the failover took effect")
	}
	if tickErr != nil && !errors.Is(tickErr, store.ErrFenced) {
		t.Fatalf("first king's tick: %v, want only fenced dispatches", tickErr)
	}
	// A late tick of the deposed king changes nothing.
	a.admit("evt-late", "github.pr.review_requested", "normal", t0, nil)
	if err := a.k.Tick(context.Background()); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed king's tick: %v, want fenced", err)
	}
	b.tick()

	tasks := b.docs(layout.QTasks, layout.Pending)
	byEvent := map[string]string{}
	for _, d := range tasks {
		var tk doc.Task
		if err := json.Unmarshal(d.Data, &tk); err != nil {
			t.Fatal(err)
		}
		if prev, dup := byEvent[tk.EventID]; dup {
			t.Errorf("event %s has two tasks: %s and %s", tk.EventID, prev, tk.ID)
		}
		byEvent[tk.EventID] = tk.ID
	}
	if len(tasks) != n+1 || len(byEvent) != n+1 {
		t.Fatalf("%d tasks for %d events, want %d", len(tasks), len(byEvent), n+1)
	}
	if p := b.docs(layout.QEvents, layout.Pending); len(p) != 0 {
		t.Errorf("%d events left pending", len(p))
	}
	disp := b.docs(layout.QEvents, layout.Dispatched)
	if len(disp) != n+1 {
		t.Fatalf("%d dispatched events, want %d", len(disp), n+1)
	}
	for _, d := range disp {
		var ev doc.Event
		json.Unmarshal(d.Data, &ev)
		if byEvent[ev.ID] != ev.TaskID {
			t.Errorf("event %s says task %s, the task of it is %s", ev.ID, ev.TaskID, byEvent[ev.ID])
		}
	}
	// One thread_start and one task.created per task, in the same
	// transactions as the tasks.
	if starts := b.docs(layout.QMessages, layout.Pending); len(starts) != n+1 {
		t.Errorf("%d thread_start messages, want %d", len(starts), n+1)
	}
	evs, err := b.st.Events(t.Context(), "", 10*n)
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]int{}
	for _, e := range evs {
		if e.Type == "task.created" {
			var d struct {
				TaskID string `json:"task_id"`
			}
			json.Unmarshal(e.Data, &d)
			created[d.TaskID]++
		}
	}
	for _, d := range tasks {
		if created[d.ID] != 1 {
			t.Errorf("task %s: task.created %d times", d.ID, created[d.ID])
		}
	}
}

// max_soldiers counts the tasks in flight on every host: one king's
// admission sees the tasks another host's general runs.
func TestPG_MaxSoldiersIsClusterWide(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	a.cfg.Concurrency.MaxSoldiers = 2
	a.lead()
	for i := range 3 {
		a.admit(fmt.Sprintf("evt-%d", i), "github.pr.review_requested", "normal", t0.Add(time.Duration(i)*time.Second), nil)
	}
	a.tick()
	pend := a.docs(layout.QTasks, layout.Pending)
	if len(pend) != 2 {
		t.Fatalf("%d tasks with max_soldiers 2", len(pend))
	}
	// Host b's general claims both; they still count.
	tq := queue.OnStore(a.st, a.l, layout.QTasks, nil, "host-b")
	for _, d := range pend {
		if err := tq.ClaimAs(layout.Pending, layout.InProgress, d.ID, store.Claim{Holder: "host-b"}); err != nil {
			t.Fatal(err)
		}
	}
	// A king on another host (after a failover) sees the same slots taken.
	b := newPGHost(t, dsn, "host-b", clk, genPR)
	b.cfg.Concurrency.MaxSoldiers = 2
	a.k.lease.Release()
	b.lead()
	b.tick()
	if p := b.docs(layout.QEvents, layout.Pending); len(p) != 1 {
		t.Fatalf("%d events pending, want the third held for a slot", len(p))
	}
	// A result on host b frees a slot: the third is admitted.
	id := pend[0].ID
	if err := kv.PutJSON(t.Context(), kv.OnStore(b.st), kv.NSResults, id, map[string]any{"task_id": id, "status": "success",
		"summary": "ok", "general": "gen-pr", "duration_seconds": 1, "completed_at": doc.FormatTime(t0), "retry_count": 0}); err != nil {
		t.Fatal(err)
	}
	b.tick()
	if p := b.docs(layout.QEvents, layout.Pending); len(p) != 0 {
		t.Fatalf("%d events pending after a slot freed", len(p))
	}
	if tk := b.task(id); tk.Status != doc.TaskCompleted || tk.Host != "host-b" {
		t.Errorf("completed task status %q host %q, want completed on host-b", tk.Status, tk.Host)
	}
}

// A task claimed by a host silent past takeover_seconds fails HostLost and
// runs again as a new attempt; the lost host's late finish is fenced; a
// task on a live host is left alone.
func TestPG_HostLossRetriesTheLostHostsTasks(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	a.lead()
	a.admit("evt-1", "github.pr.review_requested", "normal", t0, nil)
	a.admit("evt-2", "github.pr.review_requested", "normal", t0.Add(time.Second), nil)
	a.tick()
	pend := a.docs(layout.QTasks, layout.Pending)
	if len(pend) != 2 {
		t.Fatalf("%d tasks", len(pend))
	}
	lostQ := queue.OnStore(a.st, a.l, layout.QTasks, nil, "host-b")
	liveQ := queue.OnStore(a.st, a.l, layout.QTasks, nil, "host-c")
	lostTask, liveTask := pend[0].ID, pend[1].ID
	if err := lostQ.ClaimAs(layout.Pending, layout.InProgress, lostTask, store.Claim{Holder: "host-b"}); err != nil {
		t.Fatal(err)
	}
	if err := liveQ.ClaimAs(layout.Pending, layout.InProgress, liveTask, store.Claim{Holder: "host-c"}); err != nil {
		t.Fatal(err)
	}
	renewed(t, a.st, "host-a", 0)
	renewed(t, a.st, "host-b", 30*time.Minute) // silent, within takeover (1 h)
	renewed(t, a.st, "host-c", 0)
	a.tick()
	if d, _ := a.st.Get(t.Context(), layout.QTasks, lostTask); d.State != layout.InProgress {
		t.Fatalf("task of a host within takeover moved to %s", d.State)
	}
	renewed(t, a.st, "host-b", 2*time.Hour)
	a.tick()
	d, err := a.st.Get(t.Context(), layout.QTasks, lostTask)
	if err != nil || d.State != layout.Pending {
		t.Fatalf("lost host's task in %s (%v), want pending again", d.State, err)
	}
	tk := a.task(lostTask)
	if tk.RetryCount != 1 || tk.Status != doc.TaskPending || tk.NotBefore == "" {
		t.Errorf("re-queued task %+v, want attempt 1 pending with not_before", tk)
	}
	if d, _ := a.st.Get(t.Context(), layout.QTasks, liveTask); d.State != layout.InProgress {
		t.Errorf("live host's task moved to %s", d.State)
	}
	// The lost host comes back and tries to finish its old attempt.
	if err := lostQ.FinishAs(layout.InProgress, layout.Completed, lostTask, store.Claim{Holder: "host-b"}); err == nil {
		t.Fatal("the lost host finished an attempt that was taken over")
	}
	// Another host's general takes the new attempt.
	if err := liveQ.ClaimAs(layout.Pending, layout.InProgress, lostTask, store.Claim{Holder: "host-c", Attempt: 1}); err != nil {
		t.Fatalf("new attempt claim: %v", err)
	}
	evs, _ := a.st.Events(t.Context(), "", 1000)
	var lost, retried int
	for _, e := range evs {
		switch e.Type {
		case "task.host_lost":
			lost++
			if !strings.Contains(string(e.Data), "host-b") {
				t.Errorf("task.host_lost %s", e.Data)
			}
		case "task.retry_scheduled":
			retried++
			if !strings.Contains(string(e.Data), doc.ReasonHostLost) {
				t.Errorf("task.retry_scheduled %s", e.Data)
			}
		}
	}
	if lost != 1 || retried != 1 {
		t.Errorf("task.host_lost %d, task.retry_scheduled %d, want 1 each", lost, retried)
	}
}

// A resume carries the host that ran the asking attempt; once that host is
// gone past takeover_seconds a reply fails SessionLost with a ❌ naming it.
func TestPG_ResumeRunsOnTheAskingHostOrFailsSessionLost(t *testing.T) {
	dsn := pgtest.DB(t)
	clk := clock.NewFake(t0)
	a := newPGHost(t, dsn, "host-a", clk, genPR)
	a.lead()
	a.admit("evt-1", "github.pr.review_requested", "normal", t0, nil)
	a.tick()
	asked := a.docs(layout.QTasks, layout.Pending)[0].ID
	bq := queue.OnStore(a.st, a.l, layout.QTasks, nil, "host-b")
	if err := bq.ClaimAs(layout.Pending, layout.InProgress, asked, store.Claim{Holder: "host-b"}); err != nil {
		t.Fatal(err)
	}
	if err := kv.PutJSON(t.Context(), kv.OnStore(a.st), kv.NSResults, asked, map[string]any{"task_id": asked, "status": "needs_human",
		"question": "which branch?", "session_id": "sess-1", "summary": "asks", "general": "gen-pr",
		"duration_seconds": 1, "completed_at": doc.FormatTime(t0), "retry_count": 0}); err != nil {
		t.Fatal(err)
	}
	renewed(t, a.st, "host-b", 0)
	a.tick()
	if tk := a.task(asked); tk.Status != doc.ResultNeedsHuman || tk.Host != "host-b" {
		t.Fatalf("asking task status %q host %q", tk.Status, tk.Host)
	}
	reply := func(id string) {
		a.admit(id, TypeThreadReply, "high", clk.Now(), map[string]any{"text": "main",
			"reply_context": map[string]any{"general": "gen-pr", "session_id": "sess-1", "repo": nil, "task_id": asked,
				"channel": "C1", "thread_ts": "1.2"}})
	}
	reply("evt-reply-1")
	a.tick()
	var resume doc.Task
	for _, d := range a.docs(layout.QTasks, layout.Pending) {
		json.Unmarshal(d.Data, &resume)
	}
	if resume.Type != doc.TaskTypeResume || resume.Host != "host-b" || resume.OriginalTaskID != asked {
		t.Fatalf("resume task %+v, want a resume on host-b", resume)
	}

	renewed(t, a.st, "host-b", 2*time.Hour)
	reply("evt-reply-2")
	a.tick()
	var failed *doc.Task
	for _, d := range a.docs(layout.QTasks, layout.Completed) {
		var tk doc.Task
		json.Unmarshal(d.Data, &tk)
		if tk.EventID == "evt-reply-2" {
			failed = &tk
		}
	}
	if failed == nil || failed.Status != doc.ResultFailed {
		t.Fatalf("resume after the host is gone: %+v", failed)
	}
	m, err := a.st.Get(t.Context(), layout.QMessages, msgFinalID(failed.ID, doc.FinalFailed))
	if err != nil {
		t.Fatal(err)
	}
	var msg doc.Message
	json.Unmarshal(m.Data, &msg)
	if !strings.HasPrefix(msg.Content, "❌") || !strings.Contains(msg.Content, "host-b") || !strings.Contains(msg.Content, doc.ReasonSessionLost) {
		t.Errorf("failure message %q", msg.Content)
	}
}
