package proctree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// detached starts `setsid sleep 300 &` from a shell with env and returns
// the sleep's pid: the shell exits at once, so the sleep belongs to no tree
// of ours (reparented, in a session of its own).
func detached(t *testing.T, env ...string) int {
	t.Helper()
	out := filepath.Join(t.TempDir(), "pid")
	sh := exec.Command("sh", "-c", `setsid sleep 300 >/dev/null 2>&1 & echo $! > "$1"`, "sh", out)
	sh.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %q: %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// setsid execs sleep in the same pid: wait until the environment is
	// sleep's, not the shell's fork still on its way there.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); strings.HasPrefix(string(b), "sleep\x00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became sleep", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process
	}
	return pid
}

func awaitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); Alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("process %d survived the sweep", pid)
		}
		time.Sleep(10 * time.Millisecond) // the kernel reaps asynchronously
	}
}

// A detached process carrying the task's variables is killed; processes of
// another base dir, or whose task id only starts with ours, are not.
func TestSweep_KillsTheDetachedProcessesOfOneTaskOnly(t *testing.T) {
	base := t.TempDir()
	mine := detached(t, "KINGDOM_TASK_ID=task-20260101-001", "KINGDOM_BASE_DIR="+base)
	otherBase := detached(t, "KINGDOM_TASK_ID=task-20260101-001", "KINGDOM_BASE_DIR="+base+"x")
	longerID := detached(t, "KINGDOM_TASK_ID=task-20260101-0011", "KINGDOM_BASE_DIR="+base)
	n := Sweep(map[string]string{"KINGDOM_TASK_ID": "task-20260101-001", "KINGDOM_BASE_DIR": base})
	awaitGone(t, mine)
	if n != 1 {
		t.Errorf("killed %d, want 1", n)
	}
	for _, p := range []int{otherBase, longerID} {
		if !Alive(p) {
			t.Errorf("process %d of another task was killed", p)
		}
	}
	if n := Sweep(nil); n != 0 {
		t.Errorf("a sweep with no variables killed %d", n)
	}
}
