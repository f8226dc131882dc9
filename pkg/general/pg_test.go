package general

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// newPGEnv is one host of a PostgreSQL-mode kingdom: its own base dir (and
// so its own workspace, results dir and sessions registry) on the shared
// database dsn, with a freshly renewed host lease.
func newPGEnv(t *testing.T, dsn, host string) *env {
	t.Helper()
	e := newEnv(t)
	st, err := pg.Open(context.Background(), dsn, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st, e.host = st, host
	renewLease(t, e, time.Now())
	return e
}

// storedFinal is the final result of id in the env's store, nil when none.
func storedFinal(t *testing.T, e *env, id string) *doc.Result {
	t.Helper()
	b, err := kv.OnStore(e.store()).Get(context.Background(), kv.NSResults, id)
	if errors.Is(err, kv.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := schema.DecodeResult(b)
	if err != nil {
		t.Fatalf("final result of %s invalid: %v\n%s", id, err, b)
	}
	return r
}

// Two generals of the same name on two hosts share one database and race
// for 50 pending tasks: each task is claimed exactly once, a task pinned
// to h2 runs only there, and every final result names the host that ran it.
func TestGeneral_PG_TwoHostsClaimEachTaskOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	// In a kingdom the roles' own sessions keep the tmux server up; here
	// one placeholder does, or the server exits whenever the last soldier
	// ends, under another host's new-session.
	if err := tmuxC.NewSession(context.Background(), "pg-keep-server", tmux.NewOptions{}, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmuxC.Kill(context.Background(), "pg-keep-server") })
	var mu sync.Mutex
	claims := map[string][]string{}
	es := map[string]*env{}
	for _, h := range []string{"h1", "h2"} {
		e := newPGEnv(t, dsn, h)
		withAgentScript(t, e, `printf '{"task_id":"%s","status":"success","summary":"done"}' "$2" > "$1"`+"\n")
		e.m.MaxConcurrent = 4
		e.trace = func(task, m string) {
			if m == "claimed" {
				mu.Lock()
				claims[task] = append(claims[task], h)
				mu.Unlock()
			}
		}
		e.start()
		es[h] = e
	}
	const n = 50
	pinned := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("task-20260101-%03d", i+1)
		es["h1"].task(id, func(tk *doc.Task) {
			if i%5 == 0 {
				tk.Host, pinned[id] = "h2", true
			}
		})
	}
	results := kv.OnStore(es["h1"].st)
	done := func() bool {
		m, err := results.List(context.Background(), kv.NSResults)
		return err == nil && len(m) == n
	}
	var wg sync.WaitGroup
	for h, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A guard against a broken test, not a speed assertion.
			limit := time.Now().Add(3 * time.Minute)
			for !done() && time.Now().Before(limit) {
				if err := e.g.Tick(context.Background()); err != nil {
					t.Errorf("%s tick: %v", h, err)
					return
				}
				time.Sleep(20 * time.Millisecond) // let soldiers run between ticks
			}
		}()
	}
	wg.Wait()
	for _, e := range es {
		e.g.Wait()
	}
	if !done() {
		t.Fatal("not every task got its final result")
	}
	for i := range n {
		id := fmt.Sprintf("task-20260101-%03d", i+1)
		got := claims[id]
		if len(got) != 1 {
			t.Errorf("%s claimed by %v, want exactly one host", id, got)
			continue
		}
		if pinned[id] && got[0] != "h2" {
			t.Errorf("%s is pinned to h2 but ran on %s", id, got[0])
		}
		r := storedFinal(t, es["h1"], id)
		if r == nil || r.Status != doc.ResultSuccess || r.Host != got[0] {
			t.Errorf("%s: final %+v, want success from host %s", id, r, got[0])
		}
	}
}

// A final result is accepted only from the host and attempt holding the
// claim: another host's finish gets ErrFenced, writes nothing and cleans
// up locally; the holder's is written.
func TestGeneral_PG_FinishByANonHolderIsFenced(t *testing.T) {
	dsn := pgtest.DB(t)
	h1, h2 := newPGEnv(t, dsn, "h1"), newPGEnv(t, dsn, "h2")
	h1.start()
	h2.start()
	const id = "task-20260101-001"
	tk := h1.task(id)
	if err := h1.g.tasks.ClaimAs(layout.Pending, layout.InProgress, id, h1.g.claimOf(tk)); err != nil {
		t.Fatal(err)
	}
	if err := h2.g.tasks.FinishAs(layout.InProgress, layout.Completed, id, h2.g.claimOf(tk)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("non-holder FinishAs: %v, want ErrFenced", err)
	}
	// The same attempt number on the holder's host only.
	if err := h2.g.publish(context.Background(), tk, nil, &doc.Result{}); !errors.Is(err, errLost) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("non-holder publish: %v, want errLost wrapping ErrFenced", err)
	}
	for _, e := range []*env{h1, h2} {
		e.g.synthetic(id, doc.ResultFailed, doc.ReasonEngineError, "went wrong")
	}
	start := time.Now()
	h2.g.finish(context.Background(), tk, "", start, workspace{})
	if r := storedFinal(t, h1, id); r != nil {
		t.Fatalf("the non-holder's result was written: %+v", r)
	}
	if exists(h2.l.ResultRaw(id)) {
		t.Error("the non-holder kept the lost attempt's raw result")
	}
	if len(h2.events("general.claim_lost")) != 1 {
		t.Error("no general.claim_lost event from the non-holder")
	}
	h1.g.finish(context.Background(), tk, "", start, workspace{})
	r := storedFinal(t, h1, id)
	if r == nil || r.ErrorReason != doc.ReasonEngineError || r.Host != "h1" {
		t.Fatalf("holder's final = %+v, want EngineError from h1", r)
	}
}

// The self-fence on the shared store (testSelfFence, cancel_test.go).
func TestGeneral_PG_SelfFenceKillsSoldiersAndStopsClaims(t *testing.T) {
	testSelfFence(t, newPGEnv(t, pgtest.DB(t), "h1"))
}

// max_concurrent across two hosts on one database (testClusterCap,
// claim_test.go).
func TestGeneral_PG_MaxConcurrentIsClusterWide(t *testing.T) {
	dsn := pgtest.DB(t)
	if err := tmuxC.NewSession(context.Background(), "pg-keep-server-cap", tmux.NewOptions{}, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmuxC.Kill(context.Background(), "pg-keep-server-cap") })
	testClusterCap(t, []*env{newPGEnv(t, dsn, "h1"), newPGEnv(t, dsn, "h2")})
}
