package general

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// readPID reads a pid an agent script recorded, 0 when not (yet) there.
func readPID(path string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(readTrim(path)))
	return n
}

// awaitDead waits until pid is gone (a guard against a broken test, not a
// speed assertion: a SIGKILLed process is reaped by its parent or init).
func awaitDead(t *testing.T, what string, pid int) {
	t.Helper()
	limit := time.Now().Add(60 * time.Second)
	for proctree.Alive(pid) {
		if time.Now().After(limit) {
			t.Fatalf("%s (pid %d) still alive", what, pid)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc for the reaping
	}
}

// The king only records a cancel; the general owning the soldier carries
// it out, on files as on PostgreSQL (SPEC §12.1): on its next tick the soldier's session, its agent and what the
// agent detached are killed, and the attempt ends failed/Cancelled.
func TestGeneral_CancelKillsTheRunningSoldier(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	withAgentScript(t, e, fmt.Sprintf(`echo $$ > %[1]s/agent.pid
setsid sleep 600 &
echo $! > %[1]s/detached.pid
sleep 600
`, dir))
	e.start()
	const id = "task-20260101-001"
	e.task(id)
	e.tickUntil("the agent running", func() bool {
		return readPID(filepath.Join(dir, "agent.pid")) != 0 && readPID(filepath.Join(dir, "detached.pid")) != 0
	})
	agent, detached := readPID(filepath.Join(dir, "agent.pid")), readPID(filepath.Join(dir, "detached.pid"))
	sid := sessionOf(e, id)
	if err := control.WriteCancelled(context.Background(), kv.OnStore(e.store()), control.Cancelled{
		TaskID: id, RetryCount: 0, Was: layout.InProgress, By: "op", At: doc.FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	r := e.final(id)
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonCancelled {
		t.Fatalf("final = %s/%s (%s), want failed/Cancelled", r.Status, r.ErrorReason, r.Summary)
	}
	awaitDead(t, "the agent", agent)
	awaitDead(t, "the agent's detached process", detached)
	if alive, err := tmuxC.Has(context.Background(), sid); err != nil || alive {
		t.Errorf("soldier session %s alive=%v (%v) after the cancel", sid, alive, err)
	}
	if len(e.events("soldier.killed")) == 0 {
		t.Error("no soldier.killed event")
	}
	// The result went through the store's transaction that ends the claim.
	if d, err := e.store().Get(context.Background(), layout.QTasks, id); err != nil || d.State != layout.InProgress || d.Claim != (store.Claim{}) {
		t.Errorf("task after the cancel: %s claim %+v (%v), want in_progress with its claim released", d.State, d.Claim, err)
	}
}

// A cancel record of an earlier attempt does not touch the current one.
func TestGeneral_CancelOfAnotherAttemptIsIgnored(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	withAgentScript(t, e, fmt.Sprintf("echo $$ > %s/agent.pid\nsleep 600\n", dir))
	e.start()
	const id = "task-20260101-001"
	e.task(id, func(t *doc.Task) { t.RetryCount = 1 })
	e.tickUntil("the agent running", func() bool { return readPID(filepath.Join(dir, "agent.pid")) != 0 })
	// The soldier outlives the general (by design): end it with the test.
	t.Cleanup(func() { tmuxC.Kill(context.Background(), sessionOf(e, id)) })
	if err := control.WriteCancelled(context.Background(), kv.OnStore(e.store()), control.Cancelled{
		TaskID: id, RetryCount: 0, Was: layout.InProgress, By: "op", At: doc.FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.g.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !proctree.Alive(readPID(filepath.Join(dir, "agent.pid"))) || exists(e.l.ResultRaw(id)) {
		t.Fatal("a cancel of attempt 0 stopped attempt 1")
	}
}

// host_max_soldiers counts every soldier of the host: while other
// generals' soldiers fill it, this general claims nothing.
func TestGeneral_HostMaxSoldiersHoldsClaims(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	e.g.o.HostMaxSoldiers = 1
	reg := sessions.New(e.l)
	other := sessions.Entry{ID: "soldier-20260101-000000-aaaa", TaskID: "task-20260101-099", General: "gen-other", StartedAt: time.Now().UTC()}
	if err := reg.Add(other); err != nil {
		t.Fatal(err)
	}
	const id = "task-20260101-001"
	e.task(id)
	for range 3 {
		if err := e.g.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !e.tasks().Exists(layout.Pending, id) {
		t.Fatal("a task was claimed while the host ran host_max_soldiers soldiers")
	}
	if err := reg.Remove(other.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.final(id); r.Status != doc.ResultSuccess {
		t.Fatalf("after a slot freed: %+v", r)
	}
	if _, err := os.Stat(e.l.ResultFinal(id)); err != nil {
		t.Fatal(err)
	}
}

// A host whose lease was not renewed for self_fence_seconds kills its
// soldiers (their attempts end killed/HostLost) and claims nothing until
// the lease is renewed again: on either store (pg_test.go).
func TestGeneral_SelfFenceKillsSoldiersAndStopsClaims(t *testing.T) {
	testSelfFence(t, newEnv(t))
}

func testSelfFence(t *testing.T, e *env) {
	dir := t.TempDir()
	withAgentScript(t, e, fmt.Sprintf("echo $$ > %s/agent.pid\nsleep 600\n", dir))
	e.m.MaxConcurrent = 2
	e.start()
	const id, next = "task-20260101-001", "task-20260101-002"
	e.task(id)
	e.tickUntil("the agent running", func() bool { return readPID(filepath.Join(dir, "agent.pid")) != 0 })
	agent := readPID(filepath.Join(dir, "agent.pid"))

	e.staleLease = true
	renewLease(t, e, time.Now().Add(-e.sys.Store.SelfFence()-time.Second))
	e.task(next)
	var r *doc.Result
	e.tickUntil("the fenced attempt's result", func() bool { r = storedFinal(t, e, id); return r != nil })
	e.g.Wait()
	if r.Status != doc.ResultKilled || r.ErrorReason != doc.ReasonHostLost {
		t.Fatalf("final = %s/%s, want killed/HostLost", r.Status, r.ErrorReason)
	}
	awaitDead(t, "the fenced host's agent", agent)
	if st, _ := e.g.tasks.Find(next); st != layout.Pending {
		t.Fatalf("%s is %s while the host is fenced, want pending", next, st)
	}
	if len(e.events("general.fenced")) != 1 {
		t.Errorf("general.fenced emitted %d times, want once", len(e.events("general.fenced")))
	}

	// Claims resume with the renewal. The next task's cancel record keeps
	// its soldier from starting (and outliving the test).
	if err := control.WriteCancelled(context.Background(), e.g.kv, control.Cancelled{
		TaskID: next, Was: layout.Pending, By: "op", At: doc.FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	renewLease(t, e, time.Now())
	e.tickUntil("a claim after renewal", func() bool { r = storedFinal(t, e, next); return r != nil })
	if r.ErrorReason != doc.ReasonCancelled || r.Host != e.host {
		t.Fatalf("%s after renewal: %s/%s on %q, want Cancelled on %s", next, r.Status, r.ErrorReason, r.Host, e.host)
	}
}

// The self-fence runs on its own timer (SPEC §12.2): with no tick at all
// (one held up in a store call) the stale host's soldier is still killed.
func TestGeneral_SelfFenceRunsWithoutATick(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	withAgentScript(t, e, fmt.Sprintf("echo $$ > %s/agent.pid\nsleep 600\n", dir))
	e.start()
	const id = "task-20260101-001"
	e.task(id)
	e.tickUntil("the agent running", func() bool { return readPID(filepath.Join(dir, "agent.pid")) != 0 })
	renewLease(t, e, time.Now().Add(-e.sys.Store.SelfFence()-time.Second))
	awaitDead(t, "the fenced host's agent", readPID(filepath.Join(dir, "agent.pid")))
	if r := e.g.readRaw(id); r.Status != doc.ResultKilled || r.ErrorReason != doc.ReasonHostLost {
		t.Fatalf("raw result = %s/%s, want killed/HostLost", r.Status, r.ErrorReason)
	}
}

// heldKills is a store whose event log takes soldier.killed only when the
// test lets it (a host cut off from its database: each write waits).
type heldKills struct {
	store.Store
	first chan struct{} // closed at the first soldier.killed
	once  sync.Once
	gate  chan struct{}
}

func (h *heldKills) Emit(ctx context.Context, typ, actor string, data any) error {
	if typ == "soldier.killed" {
		h.once.Do(func() { close(h.first) })
		select {
		case <-h.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Store.Emit(ctx, typ, actor, data)
}

// A fenced host kills every soldier before its first event-log write: a
// write that hangs on an unreachable store must not keep the next soldier
// alive past takeover_seconds.
func TestGeneral_SelfFenceKillsEverySoldierBeforeAnyEvent(t *testing.T) {
	e := newEnv(t)
	h := &heldKills{Store: e.store(), first: make(chan struct{}), gate: make(chan struct{})}
	e.ev = eventlog.NewStoreEmitter(h, e.m.Name)
	dir := t.TempDir()
	withAgentScript(t, e, fmt.Sprintf("echo $$ > %s/agent-$KINGDOM_TASK_ID.pid\nsleep 600\n", dir))
	e.m.MaxConcurrent = 2
	e.start()
	ids := []string{"task-20260101-001", "task-20260101-002"}
	for _, id := range ids {
		e.task(id)
	}
	pid := func(id string) int { return readPID(filepath.Join(dir, "agent-"+id+".pid")) }
	e.tickUntil("both agents running", func() bool { return pid(ids[0]) != 0 && pid(ids[1]) != 0 })
	agents := []int{pid(ids[0]), pid(ids[1])}
	renewLease(t, e, time.Now().Add(-e.sys.Store.SelfFence()-time.Second))
	e.staleLease = true
	go e.g.selfFence(t.Context())
	select {
	case <-h.first:
	case <-time.After(2 * time.Minute): // a deadline against a hang, not a measure
		t.Fatal("no soldier.killed was ever emitted")
	}
	for _, a := range agents {
		awaitDead(t, "an agent of the fenced host, at its first event", a)
	}
	close(h.gate)
	e.g.Wait()
}
