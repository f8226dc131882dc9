package runner_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// pgLead opens a PostgreSQL store as host and returns a Lead for the king.
func pgLead(ctx context.Context, dsn, host string) func(context.Context) (store.Lease, error) {
	st, err := pg.Open(ctx, dsn, host)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	return func(ctx context.Context) (store.Lease, error) { return st.Lead(ctx, "king") }
}

// leasedRole counts ticks and Lead attempts, keeps the lease the runner
// hands it, and can block a tick until its context ends.
type leasedRole struct {
	ticks  atomic.Int64
	block  atomic.Bool
	lease  atomic.Pointer[store.Lease]
	tickCh chan struct{}
}

func (r *leasedRole) Tick(ctx context.Context) error {
	r.ticks.Add(1)
	select {
	case r.tickCh <- struct{}{}:
	default:
	}
	if r.block.Load() {
		<-ctx.Done() // a long tick: only losing the lease may end it
		return ctx.Err()
	}
	return nil
}

func (r *leasedRole) UseLease(l store.Lease) { r.lease.Store(&l) }

// instance is one host's runner for the king on a shared database.
type instance struct {
	role     *leasedRole
	st       *pg.Store
	tries    atomic.Int64 // Lead calls
	held     atomic.Int64 // of which refused with ErrHeld
	leaderAt chan time.Time
	done     chan struct{} // closed when Run returned err
	err      error
	cancel   context.CancelFunc
}

func startInstance(t *testing.T, dsn, host string, role *leasedRole) *instance {
	t.Helper()
	st, err := pg.Open(context.Background(), dsn, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in := &instance{role: role, st: st, leaderAt: make(chan time.Time, 1), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	o := runner.Options{
		Role: "king", Layout: layout.New(t.TempDir()), Interval: 20 * time.Millisecond, Standby: true,
		// LeadRetry and the lease check keep their defaults (1 s): the
		// logged failover time is what an operator gets.
		Lead: func(ctx context.Context) (store.Lease, error) {
			in.tries.Add(1)
			l, err := st.Lead(ctx, "king")
			if errors.Is(err, store.ErrHeld) {
				in.held.Add(1)
			}
			return l, err
		},
		OnLeader: func() { in.leaderAt <- time.Now() },
	}
	go func() { in.err = runner.Run(ctx, o, role); close(in.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(10 * time.Second): // a deadline, not a measurement
			t.Error("runner did not stop")
		}
	})
	return in
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // a deadline, not a measurement
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling another goroutine's progress
	}
}

func newRole() *leasedRole { return &leasedRole{tickCh: make(chan struct{}, 1)} }

// Two hosts run the king on one database: one leads, the other stands by;
// terminating the leader's session (what a crash or a lost host does) makes
// the leader stop at once, mid-tick, with ErrLeadershipLost, and the
// standby take over with the next epoch. Relaunched in standby, the old
// leader waits.
func TestRunner_LeaseFailoverToStandby(t *testing.T) {
	dsn := pgtest.DB(t)
	a := startInstance(t, dsn, "host-a", newRole())
	select {
	case <-a.leaderAt:
	case <-time.After(20 * time.Second):
		t.Fatal("first instance never led")
	}
	<-a.role.tickCh
	aLease := *a.role.lease.Load()
	if aLease == nil || aLease.Epoch() != 1 {
		t.Fatalf("leader's lease %v, want epoch 1", aLease)
	}
	// A fenced write of the leader commits.
	if err := a.st.Update(context.Background(), func(tx store.Tx) error {
		tx.Fence(aLease)
		return tx.Set(store.NSSequences, "probe", []byte("a"))
	}); err != nil {
		t.Fatalf("leader's fenced write: %v", err)
	}

	b := startInstance(t, dsn, "host-b", newRole())
	waitFor(t, "the standby to be refused twice", func() bool { return b.held.Load() >= 2 })
	select {
	case <-b.leaderAt:
		t.Fatal("standby led while the leader lives")
	default:
	}
	if n := b.role.ticks.Load(); n != 0 {
		t.Fatalf("standby ticked %d times", n)
	}

	a.role.block.Store(true)
	<-a.role.tickCh // a tick that blocks until the lease is lost
	killed := time.Now()
	pid := terminateLeader(t, a.st)
	var bLeadAt time.Time
	select {
	case bLeadAt = <-b.leaderAt:
	case <-time.After(20 * time.Second):
		t.Fatal("standby never took over")
	}
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the deposed leader did not stop (its blocked tick was not cancelled)")
	}
	aStopped := time.Now()
	if !errors.Is(a.err, runner.ErrLeadershipLost) {
		t.Fatalf("deposed leader's Run: %v, want ErrLeadershipLost", a.err)
	}
	t.Logf("failover with default settings: standby led %v after its leader's backend (pid %d) was terminated; the deposed leader stopped after %v",
		bLeadAt.Sub(killed).Round(time.Millisecond), pid, aStopped.Sub(killed).Round(time.Millisecond))
	bLease := *b.role.lease.Load()
	if bLease.Epoch() != aLease.Epoch()+1 {
		t.Fatalf("new leader's epoch %d, want %d", bLease.Epoch(), aLease.Epoch()+1)
	}
	// The deposed leader's fenced write never lands.
	err := a.st.Update(context.Background(), func(tx store.Tx) error {
		tx.Fence(aLease)
		return tx.Set(store.NSSequences, "probe", []byte("a-late"))
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader's write: %v, want ErrFenced", err)
	}

	// start relaunches the old leader in standby: it waits.
	a2 := startInstance(t, dsn, "host-a", newRole())
	waitFor(t, "the relaunched instance to be refused twice", func() bool { return a2.held.Load() >= 2 })
	select {
	case <-a2.leaderAt:
		t.Fatal("the relaunched instance led while the new leader lives")
	default:
	}
	// A clean shutdown of the leader hands over too.
	b.cancel()
	<-b.done
	if b.err != nil {
		t.Fatalf("leader's clean shutdown: %v", b.err)
	}
	select {
	case <-a2.leaderAt:
	case <-time.After(20 * time.Second):
		t.Fatal("standby never took over after a clean shutdown")
	}
	if l := *a2.role.lease.Load(); l.Epoch() != 3 {
		t.Fatalf("third leader's epoch %d, want 3", l.Epoch())
	}
}

// terminateLeader ends the backend holding the king's advisory lock, as the
// server does when the leader's process or host dies.
func terminateLeader(t *testing.T, st *pg.Store) int {
	t.Helper()
	var pid int
	err := st.Pool().QueryRow(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype='advisory' AND objid=hashtext('king')::oid AND objsubid=2 AND granted`).Scan(&pid)
	if err != nil {
		t.Fatalf("find the leader's backend: %v", err)
	}
	if _, err := st.Pool().Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// --once with a lease asks once: another leader means an error wrapping
// store.ErrHeld (start's "leader held" exit), never a wait.
func TestRunner_OnceWithLeaseHeldElsewhereFails(t *testing.T) {
	dsn := pgtest.DB(t)
	a := startInstance(t, dsn, "host-a", newRole())
	<-a.leaderAt
	st, err := pg.Open(context.Background(), dsn, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ticked := false
	err = runner.Run(context.Background(), runner.Options{
		Role: "king", Layout: layout.New(t.TempDir()), Once: true,
		Lead: func(ctx context.Context) (store.Lease, error) { return st.Lead(ctx, "king") },
	}, tickFunc(func(context.Context) error { ticked = true; return nil }))
	if !errors.Is(err, store.ErrHeld) || ticked {
		t.Fatalf("once while held: err %v ticked %v, want ErrHeld and no tick", err, ticked)
	}
}

// A leader process killed with SIGKILL loses its session with it: a
// standby process on another "host" takes over.
func TestRunner_LeaseStandbyTakesOverAfterSIGKILL(t *testing.T) {
	dsn := pgtest.DB(t)
	start := func(host string, standby bool) (*exec.Cmd, *bufio.Reader) {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "KINGDOM_RUNNER_HELPER="+t.TempDir(), "KINGDOM_RUNNER_PG_DSN="+dsn, "KINGDOM_RUNNER_HOST="+host)
		if standby {
			c.Env = append(c.Env, "KINGDOM_RUNNER_STANDBY=1")
		}
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c, bufio.NewReader(out)
	}
	first, out1 := start("host-a", false)
	if got := readLine(t, out1); got != "leader" {
		t.Fatalf("first instance said %q", got)
	}
	_, out2 := start("host-b", true)
	got := make(chan time.Time, 1)
	go func() {
		if s, _ := out2.ReadString('\n'); s == "leader\n" {
			got <- time.Now()
		}
	}()
	// The standby must have asked (and been refused) before the kill for
	// the test to mean anything: its first ask happens at start, which
	// takes far less than this.
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("standby led while the leader lives")
	default:
	}
	killed := time.Now()
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	select {
	case at := <-got:
		t.Logf("standby process led %v after the leader process was SIGKILLed (default 1 s retry)", at.Sub(killed).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("standby never took over")
	}
}

// A leader whose tick does not finish within LeaderStall gives its lease
// up (another instance can lead at once) and Run returns
// ErrLeadershipLost, even though the tick itself never returns.
func TestRunner_StalledTickGivesUpTheLead(t *testing.T) {
	l := layout.New(t.TempDir())
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hang := make(chan struct{})
	defer close(hang)
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(context.Background(), runner.Options{
			Role: "king", Layout: l, Interval: time.Hour, LeaderStall: 100 * time.Millisecond,
			Lead: func(ctx context.Context) (store.Lease, error) { return st.Lead(ctx, "king") },
		}, tickFunc(func(context.Context) error {
			close(entered)
			<-hang // hung: deaf to its context
			return nil
		}))
	}()
	<-entered
	select {
	case err := <-done:
		if !errors.Is(err, runner.ErrLeadershipLost) {
			t.Fatalf("Run = %v, want ErrLeadershipLost", err)
		}
	case <-time.After(2 * time.Minute): // far beyond stall + grace: only a hang gets here
		t.Fatal("Run did not return while its tick hung")
	}
	other, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lease, err := other.Lead(context.Background(), "king")
	if err != nil {
		t.Fatalf("the lead after a stall: %v, want it free", err)
	}
	lease.Release()
}
