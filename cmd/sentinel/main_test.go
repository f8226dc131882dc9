package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sentinel-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "sentinel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, base string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--base-dir", base}, args...)...)
	cmd.Env = append(os.Environ(), "KINGDOM_TMUX_SOCKET=kingdom-test-sentinel-unused")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestOnce_QueuesInboxFile(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(l.Inbox(), "hello.json")
	os.WriteFile(p, []byte(`{"id":"evt-cli-1","type":"demo.hello"}`), 0o600)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(p, old, old)
	out, code := run(t, base, "--once")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(l.QueueState(layout.QEvents, layout.Pending), "evt-cli-1.json")); err != nil {
		t.Errorf("event not queued: %v\n%s", err, out)
	}
	if _, err := os.Stat(p); err == nil {
		t.Error("inbox file not deleted")
	}
	if !strings.Contains(out, "event queued") {
		t.Errorf("no log line on stdout:\n%s", out)
	}
}

func TestConfigError_Exit2NamesFileAndKey(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	os.WriteFile(l.ConfigFile("sentinel.yaml"), []byte("polling:\n  inbox: {}\n  gitlab:\n    interval_seconds: 5\n"), 0o600)
	out, code := run(t, base, "--once")
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, out)
	}
	if !strings.Contains(out, "sentinel.yaml") || !strings.Contains(out, "gitlab") {
		t.Errorf("error does not name the file and key: %s", out)
	}
}

// The daemon reads an inbox file dropped while it runs (inotify + the 1 s
// wait) and exits 0 on SIGTERM.
func TestDaemon_PicksUpInboxFileAndStopsOnSIGTERM(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	os.WriteFile(l.ConfigFile("sentinel.yaml"), []byte("polling:\n  inbox:\n    interval_seconds: 60\n"), 0o600)
	cmd := exec.Command(bin, "--base-dir", base)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	// Write-then-rename, as producers do.
	tmp := filepath.Join(l.Inbox(), ".tmp-producer.json")
	os.WriteFile(tmp, []byte(`{"id":"evt-daemon-1","type":"demo.hello"}`), 0o600)
	if err := os.Rename(tmp, filepath.Join(l.Inbox(), "drop.json")); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(l.QueueState(layout.QEvents, layout.Pending), "evt-daemon-1.json")
	deadline := time.Now().Add(60 * time.Second) // a hang guard, not a speed assertion
	for {
		if _, err := os.Stat(want); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event not queued by the daemon (60 s interval: only inotify + wake can do it):\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the result of another process
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not stop on SIGTERM")
	}
}
