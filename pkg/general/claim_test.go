package general

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// syncBuf is a log sink tests read while the general writes.
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

// captureLog sends the general's log to a buffer.
func captureLog(e *env) *syncBuf {
	buf := &syncBuf{}
	e.g.log = slog.New(slog.NewTextHandler(buf, nil))
	return buf
}

func writeHealth(t *testing.T, e *env, level string, at time.Time) {
	t.Helper()
	r := &health.Resources{Timestamp: doc.FormatTime(at), Health: level, Sessions: health.SessionStats{SoldiersMax: 3}}
	if err := health.Write(e.l.Resources(), r); err != nil {
		t.Fatal(err)
	}
}

// Each host's generals claim only while their own host admits (SPEC
// §12.2), whatever the leader's host said when it admitted the task: red,
// or a resources.json stale past the king's rule, holds every claim; the
// claims resume with the health, and each change is logged once.
func TestGeneral_ClaimsOnlyWhileThisHostAdmits(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	logs := captureLog(e)
	const id = "task-20260101-001"
	e.task(id)
	writeHealth(t, e, health.Red, time.Now())
	for range 3 {
		if err := e.g.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !e.tasks().Exists(layout.Pending, id) {
		t.Fatal("a task was claimed while this host's health is red")
	}
	writeHealth(t, e, health.Green, time.Now().Add(-health.StaleAfter-time.Minute))
	for range 3 {
		if err := e.g.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !e.tasks().Exists(layout.Pending, id) {
		t.Fatal("a task was claimed while this host's resources.json is stale")
	}
	if n := logs.count("health admits nothing"); n != 1 {
		t.Errorf("%q logged %d times, want once:\n%s", "health admits nothing", n, logs.b.String())
	}
	writeHealth(t, e, health.Green, time.Now())
	if r := e.final(id); r.Status != doc.ResultSuccess {
		t.Fatalf("after the health recovered: %+v", r)
	}
	if n := logs.count("health admits again"); n != 1 {
		t.Errorf("%q logged %d times, want once", "health admits again", n)
	}
}

// A yellow host claims only high-priority tasks, as the king admits.
func TestGeneral_YellowHostClaimsOnlyHighPriority(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	writeHealth(t, e, health.Yellow, time.Now())
	const normal, high = "task-20260101-001", "task-20260101-002"
	e.task(normal)
	e.task(high, func(tk *doc.Task) { tk.Priority = doc.PriorityHigh })
	if r := e.final(high); r.Status != doc.ResultSuccess {
		t.Fatalf("high-priority task on a yellow host: %+v", r)
	}
	for range 3 {
		if err := e.g.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !e.tasks().Exists(layout.Pending, normal) {
		t.Fatal("a normal-priority task was claimed on a yellow host")
	}
}

// requeue does what the king's retry does to a running attempt (HostLost
// after takeover, say): the task goes back to pending as the next attempt,
// its claim released, in one transaction.
func requeue(t *testing.T, e *env, tk *doc.Task) *doc.Task {
	t.Helper()
	next := *tk
	next.RetryCount++
	next.Status = doc.TaskPending
	b, err := json.Marshal(&next)
	if err != nil {
		t.Fatal(err)
	}
	err = e.store().Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Finish(layout.QTasks, layout.InProgress, layout.Pending, tk.ID, store.Claim{Holder: e.host, Attempt: tk.RetryCount}); err != nil {
			return err
		}
		return tx.Put(layout.QTasks, layout.Pending, tk.ID, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return &next
}

// waitingAgent is an agent script that records each run in dir/runs and
// waits for dir/release-<run> (or dir/release) before succeeding; dir/live
// holds one file per agent running.
func waitingAgent(t *testing.T, e *env, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "live"), 0o700); err != nil {
		t.Fatal(err)
	}
	withAgentScript(t, e, fmt.Sprintf(`d=%s
n=$(cat "$d/runs" 2>/dev/null | wc -l)
echo "$2" >> "$d/runs"
touch "$d/live/$2"
while [ ! -e "$d/release-$n" ] && [ ! -e "$d/release" ]; do sleep 0.05; done
rm -f "$d/live/$2"
printf '{"task_id":"%%s","status":"success","summary":"run %%s"}' "$2" "$n" > "$1"
`, dir))
}

func lines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// Issue 33: a host whose attempt was re-queued under it (the king's retry)
// must not claim the retry while the old attempt still ends here: the old
// attempt's cleanup would destroy the retry's workspace and files (they
// are named by the task). The retry is claimed once the old attempt is
// dropped as lost, and runs in a workspace of its own.
func TestGeneral_LostAttemptSparesTheRetrysWorkspace(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	waitingAgent(t, e, dir)
	e.m.MaxConcurrent = 2 // a free slot: the retry could be claimed
	e.start()
	const id = "task-20260101-001"
	tk := e.task(id)
	e.tickUntil("attempt 0 running", func() bool { return lines(filepath.Join(dir, "runs")) == 1 })
	requeue(t, e, tk)
	for range 10 {
		renewLease(t, e, time.Now())
		if err := e.g.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, _ := e.g.tasks.Find(id); st != layout.Pending {
		t.Fatalf("the retry is %s while attempt 0 still runs here, want pending", st)
	}
	// Attempt 0 ends: its finish is fenced out (lost), then the retry runs.
	os.WriteFile(filepath.Join(dir, "release-0"), nil, 0o600)
	e.tickUntil("attempt 1 running", func() bool { return lines(filepath.Join(dir, "runs")) == 2 })
	var tf TaskFile
	b, err := os.ReadFile(filepath.Join(e.l.TaskDir(e.m.Name, id), ".kingdom-task.json"))
	if err != nil || json.Unmarshal(b, &tf) != nil || tf.RetryCount != 1 {
		t.Fatalf("attempt 1's workspace: %s (%v), want its task file with retry_count 1", b, err)
	}
	if len(e.events("general.claim_lost")) != 1 {
		t.Error("attempt 0 was not dropped as lost")
	}
	os.WriteFile(filepath.Join(dir, "release-1"), nil, 0o600)
	r := e.final(id)
	if r.Status != doc.ResultSuccess || r.RetryCount != 1 || r.Summary != "run 1" {
		t.Fatalf("final = %+v, want attempt 1's success", r)
	}
}

// A host fenced while an attempt's workspace was prepared starts no
// soldier for it (killed/HostLost), and a fence that begins in the middle
// of a tick claims nothing more in it.
func TestGeneral_FenceDuringATickStartsAndClaimsNothing(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	waitingAgent(t, e, dir)
	e.m.MaxConcurrent = 2
	const first, second = "task-20260101-001", "task-20260101-002"
	e.trace = func(task, m string) {
		if m == "claimed" && task == first {
			renewLease(t, e, time.Now().Add(-e.sys.Store.SelfFence()-time.Second))
		}
	}
	e.start()
	e.task(first)
	e.task(second)
	if err := e.g.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.g.Wait()
	r := storedFinal(t, e, first)
	if r == nil || r.Status != doc.ResultKilled || r.ErrorReason != doc.ReasonHostLost {
		t.Fatalf("final of %s = %+v, want killed/HostLost", first, r)
	}
	if n := lines(filepath.Join(dir, "runs")); n != 0 || len(e.events("soldier.spawned")) != 0 {
		t.Errorf("a fenced host started %d agents (%d soldier.spawned)", n, len(e.events("soldier.spawned")))
	}
	if st, _ := e.g.tasks.Find(second); st != layout.Pending {
		t.Fatalf("%s is %s after a fence began mid-tick, want pending", second, st)
	}
}

// max_concurrent is cluster-wide (SPEC §11.7 Caps): two generals of one
// name ticking at once on two hosts of one files store never run more
// than the cap between them.
func TestGeneral_MaxConcurrentIsClusterWide(t *testing.T) {
	e1 := newEnv(t)
	e2 := &env{t: t, l: e1.l, m: e1.m, sys: e1.sys, clk: e1.clk, host: "h2", st: e1.store()}
	testClusterCap(t, []*env{e1, e2})
}

func testClusterCap(t *testing.T, es []*env) {
	const cap, n = 3, 10
	dir := t.TempDir()
	for _, e := range es {
		waitingAgent(t, e, dir)
		e.m.MaxConcurrent = cap
		e.start()
	}
	for i := range n {
		es[0].task(fmt.Sprintf("task-20260101-%03d", i+1))
	}
	live := func() int {
		ents, _ := os.ReadDir(filepath.Join(dir, "live"))
		return len(ents)
	}
	var over sync.Once
	peak := 0
	var mu sync.Mutex
	var ticking sync.RWMutex // held for writing: no tick runs
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				renewLease(t, e, time.Now())
				ticking.RLock()
				err := e.g.Tick(context.Background())
				ticking.RUnlock()
				if err != nil {
					t.Errorf("%s tick: %v", e.host, err)
					return
				}
				if l := live(); l > cap {
					over.Do(func() { t.Errorf("%d agents running on a cap of %d", l, cap) })
				} else {
					mu.Lock()
					peak = max(peak, l)
					mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	results := kv.OnStore(es[0].store())
	finished := func() int {
		m, _ := results.List(context.Background(), kv.NSResults)
		return len(m)
	}
	// Phase 1: nothing finishes; both generals keep ticking.
	limit := time.Now().Add(30 * time.Second)
	for live() < cap && time.Now().Before(limit) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	ticking.Lock() // a claim beyond the cap lives until its tick gives it back
	claimed, err := es[0].g.claimedAttempts(context.Background())
	ticking.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if claimed != cap || live() != cap {
		t.Errorf("while every agent waits: %d claimed, %d running, want %d", claimed, live(), cap)
	}
	// Phase 2: every agent finishes at once; the rest run, never more
	// than the cap at a time.
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
	limit = time.Now().Add(time.Minute)
	for finished() < n && time.Now().Before(limit) {
		time.Sleep(20 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	for _, e := range es {
		e.g.Wait()
	}
	if got := finished(); got != n {
		t.Fatalf("%d of %d tasks finished", got, n)
	}
	if runs := lines(filepath.Join(dir, "runs")); runs != n {
		t.Errorf("%d agent runs for %d tasks", runs, n)
	}
	if peak != cap {
		t.Logf("peak running agents %d (cap %d)", peak, cap)
	}
}
