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

// A shell in its own process group starts a child that moves to a new
// session (setsid) and a grandchild in the shell's group: Kill of the
// shell's tree takes all of them down.
func TestKill_TakesTheWholeTreeEvenAChildThatLeftTheGroup(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	sh := exec.Command("sh", "-c", `sleep 300 & echo $! >> "$1"; setsid sleep 301 & echo $! >> "$1"; wait`, "sh", pids)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { sh.Wait(); close(waited) }()
	var kids []int
	for deadline := time.Now().Add(60 * time.Second); len(kids) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("children never started (pids %v)", kids)
		}
		time.Sleep(20 * time.Millisecond) // polling real processes
		b, _ := os.ReadFile(pids)
		kids = kids[:0]
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			kids = append(kids, n)
		}
	}
	tree := Descendants(sh.Process.Pid)
	if len(tree) < 3 {
		t.Fatalf("tree %+v, want the shell and its two children", tree)
	}
	Kill(tree)
	<-waited
	for _, p := range kids {
		for deadline := time.Now().Add(60 * time.Second); Alive(p); {
			if time.Now().After(deadline) {
				t.Fatalf("child %d survived", p)
			}
			time.Sleep(20 * time.Millisecond) // the kernel reaps asynchronously
		}
	}
}

func TestDescendants_OfAMissingProcessIsEmpty(t *testing.T) {
	if got := Descendants(1 << 30); got != nil {
		t.Fatalf("got %+v", got)
	}
	if got := Descendants(1); got != nil {
		t.Fatalf("pid 1: got %+v", got)
	}
}

// WaitExit returns when the process ends (a zombie counts: the general
// waits for soldiers that are tmux's children, never its own), and false
// when it outlives the wait.
func TestIdentity_WaitExitWakesOnTheExit(t *testing.T) {
	short := exec.Command("sleep", "0.2")
	long := exec.Command("sleep", "30")
	for _, c := range []*exec.Cmd{short, long} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { long.Process.Kill(); long.Wait(); short.Wait() }()
	sid, ok1 := Identify(short.Process.Pid)
	lid, ok2 := Identify(long.Process.Pid)
	if !ok1 || !ok2 {
		t.Fatal("children not identified")
	}
	if !sid.WaitExit(20 * time.Second) {
		t.Fatal("WaitExit = false for a process that ended")
	}
	if !sid.Exited() {
		t.Fatal("WaitExit returned before the exit")
	}
	if lid.WaitExit(100 * time.Millisecond) {
		t.Fatal("WaitExit = true for a process still running")
	}
	if !(Identity{PID: 1 << 22}).WaitExit(time.Second) {
		t.Fatal("WaitExit = false for a pid that names no process")
	}
}
