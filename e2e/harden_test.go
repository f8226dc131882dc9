package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// Issue #13 item 7, on the real binaries: a sentinel frozen (stopped) keeps
// its leader lock. The chamberlain kills the frozen process itself, not only
// its tmux session, and start's relaunch (--standby) takes the lock over: a
// new sentinel ticks again and the crash-loop guard never trips.
func TestHungRole_IsKilledAndItsRelaunchTakesOver(t *testing.T) {
	k := NewKingdom(t, map[string]string{
		"config/system.yaml":      "watchdog:\n  interval_seconds: 1\n  crash_loop:\n    max_restarts: 3\n    window_minutes: 10\n",
		"config/sentinel.yaml":    "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 1\nheartbeat:\n  threshold_seconds: 3\n",
	})
	k.Start()
	k.WaitRoles("sentinel", "king", "chamberlain")
	var frozen int
	k.Eventually("sentinel to lead", 30*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("sentinel"))
		frozen = pid
		return held && pid > 0
	})
	freeze(t, frozen)
	t.Cleanup(func() { syscall.Kill(frozen, syscall.SIGKILL) })
	stoppedAt := time.Now()
	k.Eventually("a new sentinel to lead and tick", 90*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("sentinel"))
		if !held || pid == frozen || pid <= 0 {
			return false
		}
		fi, err := os.Stat(k.L.Heartbeat("sentinel"))
		return err == nil && fi.ModTime().After(stoppedAt)
	})
	if proctree.Alive(frozen) {
		t.Errorf("the frozen sentinel (pid %d) is still alive", frozen)
	}
	for _, ev := range k.InternalEvents() {
		if ev.Type == "system.crash_loop" && strings.Contains(string(ev.Data), "sentinel") {
			t.Errorf("the crash-loop guard counted the relaunches as crashes: %s", ev.Data)
		}
	}
	t.Logf("a new sentinel ticked %v after the old one froze", time.Since(stoppedAt).Round(time.Millisecond))
}

// freeze stops every thread of pid in a ptrace stop (PTRACE_SEIZE then
// PTRACE_INTERRUPT) until the test ends: a process that stays hung. SIGSTOP
// would not do: tmux sends SIGCONT to a pane process that stops, and
// SIGTSTP/SIGTTIN are discarded for a pane's orphaned process group. A
// SIGKILL still ends a ptrace-stopped process.
func freeze(t *testing.T, pid int) {
	t.Helper()
	const ptraceSeize, ptraceInterrupt = 0x4206, 0x4207
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		// ptrace requests must come from the tracer thread.
		runtime.LockOSThread()
		seized := map[int]bool{}
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
				if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceInterrupt, uintptr(tid), 0, 0, 0, 0); e != 0 {
					errc <- e
					return
				}
				seized[tid], more = true, true
			}
		}
		errc <- nil
		<-done
		for tid := range seized {
			syscall.PtraceDetach(tid)
		}
	}()
	if err := <-errc; err != nil {
		t.Fatalf("freeze pid %d: %v", pid, err)
	}
	t.Cleanup(func() { close(done) })
}
