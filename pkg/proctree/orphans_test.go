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

// A subreaper's sweep kills what an engine detached, two generations deep
// (a detached shell and the sleep it started), and nothing of another
// task's, though both are its children.
func TestSweepOrphans_KillsEveryGenerationOfOneTaskOnly(t *testing.T) {
	if err := AdoptOrphans(); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	mine := []string{"KINGDOM_TASK_ID=task-20260101-001", "KINGDOM_BASE_DIR=" + base}
	other := detached(t, "KINGDOM_TASK_ID=task-20260101-002", "KINGDOM_BASE_DIR="+base)

	dir := t.TempDir()
	sh := exec.Command("sh", "-c", `setsid sh -c 'sleep 300 & echo $! > "$1/grandchild"; echo $$ > "$1/child"; wait' sh "$1" >/dev/null 2>&1 &`, "sh", dir)
	sh.Env = append([]string{"PATH=" + os.Getenv("PATH")}, mine...)
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	pidOf := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); pidOf("child") == 0 || pidOf("grandchild") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the detached shell did not start its sleep")
		}
		time.Sleep(10 * time.Millisecond) // real processes starting
	}
	child, grandchild := pidOf("child"), pidOf("grandchild")
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL); _ = syscall.Kill(grandchild, syscall.SIGKILL) })

	n := SweepOrphans(map[string]string{"KINGDOM_TASK_ID": "task-20260101-001", "KINGDOM_BASE_DIR": base})
	awaitGone(t, child)
	awaitGone(t, grandchild)
	if n != 2 {
		t.Errorf("killed %d, want 2 (the shell and its sleep)", n)
	}
	if !Alive(other) {
		t.Errorf("process %d of another task was killed", other)
	}
	if n := SweepOrphans(nil); n != 0 {
		t.Errorf("a sweep with no variables killed %d", n)
	}
}
