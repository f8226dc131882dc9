package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// startBin builds this command once per test.
func startBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "start")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build start: %v\n%s", err, out)
	}
	return bin
}

// runStart runs the built start with a private tmux socket; it returns the
// output and the exit code.
func runStart(t *testing.T, bin, base string, args ...string) (string, string, int) {
	t.Helper()
	sock := fmt.Sprintf("kingdom-cmdstart-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { (&tmux.Client{Socket: sock}).KillServer(t.Context()) })
	cmd := exec.Command(bin, append(args, "--base-dir", base)...)
	cmd.Env = append(os.Environ(), tmux.EnvSocket+"="+sock)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

func TestStartCommands_StatusEventsRestartExitCodes(t *testing.T) {
	bin := startBin(t)
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}

	// Nothing runs: the core roles are down, so status exits 2 like
	// chamberlain --once, and --json carries the same verdict.
	out, _, code := runStart(t, bin, l.Base, "status", "--json")
	if code != 2 {
		t.Fatalf("status --json exit %d, want 2:\n%s", code, out)
	}
	var doc struct {
		Verdict struct {
			Exit     int `json:"exit"`
			Problems []struct {
				Role string `json:"role"`
			} `json:"problems"`
		} `json:"verdict"`
		Hosts []any `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if doc.Verdict.Exit != 2 || doc.Hosts == nil {
		t.Errorf("document %+v", doc)
	}
	if out, _, code := runStart(t, bin, l.Base, "status"); code != 2 || !strings.Contains(out, "king down (no tmux session)") {
		t.Errorf("status exit %d:\n%s", code, out)
	}

	if out, _, code := runStart(t, bin, l.Base, "events", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("events --json exit %d: %q", code, out)
	}
	if _, errOut, code := runStart(t, bin, l.Base, "events", "cancel", "../evt-1"); code != 2 || !strings.Contains(errOut, "event id") {
		t.Errorf("events cancel exit %d: %s", code, errOut)
	}
	if _, errOut, code := runStart(t, bin, l.Base, "restart", "gen-nope"); code != 2 || !strings.Contains(errOut, "unknown role") {
		t.Errorf("restart of an unknown role exit %d: %s", code, errOut)
	}
	if _, errOut, code := runStart(t, bin, l.Base, "restart", "king"); code != 1 || !strings.Contains(errOut, "start is not running") {
		t.Errorf("restart without start exit %d: %s", code, errOut)
	}
}
