package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// hungStall is store.leader_stall_seconds in the hung-leader test: short,
// so the test is short, and well above the runner's 5 s renewals, so a
// leader that is only slow is not deposed.
const hungStall = 15

// TestCluster_HungLeader (SPEC §12.2 "a stalled leader gives up its
// lease"): on two hosts sharing one PostgreSQL, the leading king (then, on
// a new cluster, the leading envoy) is frozen whole while it leads. The
// other host's standby deposes it once its lease has gone unrenewed for
// leader_stall_seconds and leads; events dropped before and during the
// freeze complete exactly once with one ✅ in the fake Slack. Thawed, the
// old process finds its lease gone, leads nothing, writes nothing twice and
// exits for start to relaunch it in standby.
//
// The freeze is a ptrace stop, not SIGSTOP: tmux sends SIGCONT to a pane
// process that stops (its server's SIGCHLD handler), so a SIGSTOPped role
// runs on a moment later and keeps renewing its lease. That is why an
// earlier attempt of this test saw the "frozen" king's row renewed and no
// takeover.
func TestCluster_HungLeader(t *testing.T) {
	for _, role := range []string{layout.RoleKing, layout.RoleEnvoy} {
		t.Run(role, func(t *testing.T) { hungLeader(t, role) })
	}
}

func hungLeader(t *testing.T, role string) {
	c := newCluster(t, clusterOpts{hosts: 2, proxied: -1, leaderStall: hungStall, slack: true})
	// h1 first and alone, so it leads both roles.
	c.Hosts[0].Start()
	c.Hosts[0].WaitRoles(layout.RoleSentinel, "gen-work")
	c.Eventually("h1 to lead the king and the envoy", 90*time.Second, func() bool {
		return c.Leader(layout.RoleKing) == "h1" && c.Leader(layout.RoleEnvoy) == "h1"
	})
	c.Start()
	if err := c.Slack.WaitConnected(60 * time.Second); err != nil {
		t.Fatalf("no envoy connected to the fake Socket Mode: %v", err)
	}
	events := []string{"evt-warm"}
	c.Drop(1, "evt-warm", nil)
	c.Eventually("the warm-up event's ✅", 2*time.Minute, func() bool { return c.allDone(events) })

	h1 := c.Hosts[0]
	pid, err := h1.Tmux.PanePID(context.Background(), role)
	if err != nil || pid <= 1 {
		t.Fatalf("no %s process on h1: %v", role, err)
	}
	if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !strings.HasPrefix(string(cmd), filepath.Join(binDir, role)+"\x00") {
		t.Fatalf("pid %d of h1's %s session runs %q, not the %s binary", pid, role, cmd, role)
	}
	before := c.leaderRow(role)
	if before.Holder != "h1" {
		t.Fatalf("%s is led by %q before the freeze, want h1", role, before.Holder)
	}
	// Work in flight at the freeze: the frozen leader may have read some
	// of it and not finished it.
	for j := 0; j < 4; j++ {
		id := fmt.Sprintf("evt-at-freeze-%d", j)
		events = append(events, id)
		c.Drop(j%2, id, nil)
	}
	time.Sleep(300 * time.Millisecond)
	thaw := freezeProc(t, pid)
	frozenAt := time.Now()
	t.Logf("froze h1's %s (pid %d, epoch %d, lease renewed %s before the freeze)", role, pid, before.Epoch,
		frozenAt.Sub(before.Renewed).Round(time.Millisecond))
	// Dropped during the freeze, on both hosts (h1's sentinel still runs).
	for j := 0; j < 2; j++ {
		id := fmt.Sprintf("evt-during-freeze-%d", j)
		events = append(events, id)
		c.Drop(j, id, nil)
	}

	var takeover time.Duration
	c.Eventually("h2 to lead "+role+" while h1's is frozen", 2*time.Minute, func() bool {
		if c.Leader(role) == "h2" {
			takeover = time.Since(frozenAt)
			return true
		}
		return false
	})
	after := c.leaderRow(role)
	if !proctree.Alive(pid) {
		t.Fatalf("the frozen %s (pid %d) died before the takeover: killed, not deposed", role, pid)
	}
	t.Logf("FIGURE: hung leader (%s frozen) to a standby's leadership on another host: %v (store.leader_stall_seconds %d, takeover_seconds %d; "+
		"the standby asks every 1 s, the leader renews every 5 s; epoch %d → %d)",
		role, takeover.Round(time.Millisecond), hungStall, clusterTakeover, before.Epoch, after.Epoch)
	c.Eventually("the events of the freeze to complete with their ✅", 2*time.Minute, func() bool { return c.allDone(events) })
	t.Logf("FIGURE: the events dropped at and during the freeze had their ✅ %v after the freeze (%v after the takeover)",
		time.Since(frozenAt).Round(time.Millisecond), (time.Since(frozenAt) - takeover).Round(time.Millisecond))
	if testing.Verbose() {
		lines := c.LogLines(1, "["+role+"]")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("h2's %s log after the takeover:\n%s", role, strings.Join(lines, "\n"))
	}

	// Thawed, the old leader must notice its lease is gone and stop.
	thaw()
	thawedAt := time.Now()
	c.Eventually("the thawed "+role+" to exit", time.Minute, func() bool { return !proctree.Alive(pid) })
	t.Logf("the thawed %s (pid %d) exited %v after the thaw", role, pid, time.Since(thawedAt).Round(time.Millisecond))
	for _, line := range c.LogLines(0, "leadership lost") {
		t.Logf("h1: %s", line)
	}
	events = append(events, "evt-after-thaw")
	c.Drop(0, "evt-after-thaw", nil)
	c.Eventually("the event after the thaw", 2*time.Minute, func() bool { return c.allDone(events) })
	time.Sleep(3 * time.Second) // more rounds of every role: a duplicate would show now
	if now := c.leaderRow(role); now.Holder != "h2" || now.Epoch != after.Epoch {
		t.Errorf("%s leadership after the thaw: %s epoch %d, want h2's epoch %d kept", role, now.Holder, now.Epoch, after.Epoch)
	}
	c.checkExactlyOnce(events)
	runs := map[string]int{}
	for _, r := range c.Runs() {
		runs[r.Task]++
	}
	for task, n := range runs {
		if n != 1 {
			t.Errorf("task %s ran %d times, want once", task, n)
		}
	}
	if g := c.GivenUp(); len(g) > 0 {
		t.Errorf("start gave a role up: %v", g)
	}
}

// leaderInfo is a leaders row as the test reads it.
type leaderInfo struct {
	Holder  string
	Epoch   int64
	Renewed time.Time
}

// leaderRow reads role's leaders row (holder, epoch, renewed_at).
func (c *Cluster) leaderRow(role string) leaderInfo {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var li leaderInfo
	if err := c.St.Pool().QueryRow(ctx, "SELECT holder, epoch, renewed_at FROM leaders WHERE name=$1", role).Scan(&li.Holder, &li.Epoch, &li.Renewed); err != nil {
		c.t.Fatalf("read the leaders row of %s: %v", role, err)
	}
	return li
}

// freezeProc stops every thread of pid in a ptrace stop (as freeze does)
// and returns thaw, which detaches and so lets the process run on from
// where it stood; thaw runs at cleanup if the test has not called it.
func freezeProc(t *testing.T, pid int) (thaw func()) {
	t.Helper()
	const ptraceSeize, ptraceInterrupt = 0x4206, 0x4207
	errc := make(chan error, 1)
	release := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		// ptrace requests must come from the tracer thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		seized := map[int]bool{}
		defer func() {
			for tid := range seized {
				syscall.PtraceDetach(tid)
			}
		}()
		for more := true; more; {
			more = false
			tids, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*")
			for _, p := range tids {
				tid, _ := strconv.Atoi(filepath.Base(p))
				if tid <= 0 || seized[tid] {
					continue
				}
				if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(tid), 0, 0, 0, 0); e != 0 {
					errc <- e
					return
				}
				seized[tid] = true
				if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceInterrupt, uintptr(tid), 0, 0, 0, 0); e != 0 {
					errc <- e
					return
				}
				more = true
			}
		}
		errc <- nil
		<-release
	}()
	if err := <-errc; err != nil {
		<-released
		t.Fatalf("freeze pid %d: %v", pid, err)
	}
	done := false
	thaw = func() {
		if done {
			return
		}
		done = true
		close(release)
		<-released
	}
	t.Cleanup(thaw)
	return thaw
}
