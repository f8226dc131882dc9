package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// `soldier-spawn run` as the soldier session runs it: a stop signal (here
// an operator's SIGTERM; tmux kill-session's SIGHUP is pkg/general's
// TestGeneral_KilledFromOutsideIsSoldierDied) takes the engine's whole
// process group down and publishes nothing — whoever stopped the soldier
// decides its result.
func TestRun_StopSignalEndsTheEngineGroupAndPublishesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "soldier-spawn")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// The engine leaves a child of its own in its group, then waits.
	sys := "runtime:\n  engine: command\n  command:\n    argv: [\"/bin/sh\", \"-c\", \"sleep 300 & echo $! > \\\"$1/child\\\"; echo $$ > \\\"$1/engine\\\"; wait\", \"sh\", \"{workdir}\"]\n"
	if err := os.WriteFile(filepath.Join(l.ConfigDir(), "system.yaml"), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(work, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	task := "task-20261125-010"
	cmd := exec.Command(bin, "run", "--base-dir", base, "--task", task, "--general", "gen-x",
		"--prompt", prompt, "--workdir", work, "--soldier-id", "soldier-1-ab")
	cmd.Env = append(os.Environ(), "KINGDOM_BASE_DIR="+base)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidOf := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(work, name))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for pidOf("engine") == 0 || pidOf("child") == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the engine did not start")
		}
		time.Sleep(10 * time.Millisecond) // the engine is a real process starting
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a guard against a hang, not a speed assertion
		cmd.Process.Kill()
		t.Fatal("soldier-spawn run did not end on SIGTERM")
	}
	for _, name := range []string{"engine", "child"} {
		pid := pidOf(name)
		gone := func() bool {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			return err != nil || strings.Contains(string(st), ") Z ")
		}
		for end := time.Now().Add(60 * time.Second); !gone() && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond) // the kernel delivers the group kill
		}
		if !gone() {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the %s (%d) outlived its soldier", name, pid)
		}
	}
	if _, err := os.Stat(l.ResultRaw(task)); !os.IsNotExist(err) {
		t.Errorf("a raw result was published for a stopped soldier (%v)", err)
	}
}

// tmux kill-session's SIGHUP (a cancel, a timeout) ends the soldier, and
// with it what its agent detached: a `setsid` child, in a session of its
// own and out of the engine's group, carries the task's variables and is
// swept before the soldier exits.
func TestRun_HangupSweepsWhatTheAgentDetached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "soldier-spawn")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	sys := "runtime:\n  engine: command\n  command:\n    argv: [\"/bin/sh\", \"-c\", \"setsid sleep 300 >/dev/null 2>&1 & echo $! > \\\"$1/detached\\\"; echo $$ > \\\"$1/engine\\\"; sleep 299\", \"sh\", \"{workdir}\"]\n"
	if err := os.WriteFile(filepath.Join(l.ConfigDir(), "system.yaml"), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(work, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	cmd := exec.Command(bin, "run", "--base-dir", base, "--task", "task-20261125-011", "--general", "gen-x",
		"--prompt", prompt, "--workdir", work, "--soldier-id", "soldier-1-ac")
	cmd.Env = append(os.Environ(), "KINGDOM_BASE_DIR="+base)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidOf := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(work, name))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); pidOf("engine") == 0 || pidOf("detached") == 0; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the engine did not start")
		}
		time.Sleep(10 * time.Millisecond) // the engine is a real process starting
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("a hung-up soldier exited 0")
	}
	pid := pidOf("detached")
	gone := func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(st), ") Z ")
	}
	for end := time.Now().Add(60 * time.Second); !gone() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond) // the kernel delivers the kill
	}
	if !gone() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the detached child %d outlived its soldier", pid)
	}
}
