package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

var allBinaries = []string{"start", "sentinel", "king", "general", "envoy", "chamberlain", "soldier-spawn"}

func runIn(t *testing.T, base, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), "KINGDOM_BASE_DIR="+base, "KINGDOM_TMUX_SOCKET=kingdom-e2e-cli-unused")
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a binary that started a daemon instead of refusing
			cmd.Process.Kill()
		}
	}()
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

// Every binary refuses an unknown subcommand with its usage and exit 2 (it
// never runs: `start frobnicate` must not start the kingdom), and prints
// the version stamped at build with --version.
func TestBinaries_UnknownSubcommandAndVersion(t *testing.T) {
	base := filepath.Join(t.TempDir(), "kingdom")
	for _, name := range allBinaries {
		out, code := runIn(t, base, filepath.Join(binDir, name), "frobnicate")
		if code != 2 || !strings.Contains(out, "USAGE") || !strings.Contains(out, `"frobnicate"`) {
			t.Errorf("%s frobnicate: exit %d, want 2 with usage\n%s", name, code, out)
		}
		out, code = runIn(t, base, filepath.Join(binDir, name), "--version")
		if code != 0 || !strings.Contains(out, name+" version dev") {
			t.Errorf("%s --version: exit %d, output %q", name, code, out)
		}
	}
	if held, _ := lockfile.Held(filepath.Join(base, "state", "start", "leader.lock")); held {
		t.Fatal("start frobnicate started the kingdom")
	}
	out, _ := runIn(t, base, filepath.Join(binDir, "envoy"), "reply", "--help")
	if strings.Contains(out, "--once") || strings.Contains(out, "--standby") {
		t.Errorf("envoy reply --help lists flags that do not apply:\n%s", out)
	}

	// The Makefile stamps the version with -ldflags -X.
	stamped := filepath.Join(t.TempDir(), "king")
	build := exec.Command("go", "build", "-tags", "crashpoints", "-ldflags", "-X github.com/kingdom-dev/kingdom/pkg/app.Version=v9.8.7-e2e", "-o", stamped, "./cmd/king")
	build.Dir = ".."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	if out, code := runIn(t, base, stamped, "--version"); code != 0 || strings.TrimSpace(out) != "king version v9.8.7-e2e" {
		t.Errorf("stamped --version: exit %d, output %q", code, out)
	}
}

// A second start says the kingdom is already running and what to do;
// doctor on a missing base dir does not call the configuration valid.
func TestStart_SecondStartAndDoctorOnMissingBase(t *testing.T) {
	k := NewKingdom(t, map[string]string{"config/system.yaml": "runtime:\n  engine: command\n  command:\n    argv: [\"true\"]\n"})
	k.Start()
	k.WaitRoles("king")
	out, code := k.runBin("start")
	if code != 4 || !strings.Contains(out, "already running (pid ") || !strings.Contains(out, "start status") || !strings.Contains(out, "start stop") {
		t.Fatalf("second start: exit %d\n%s", code, out)
	}
	out, code = k.runBin("start", "doctor", "--base-dir", "/proc/x")
	if code == 0 || strings.Contains(out, "valid") || !strings.Contains(out, "base dir") {
		t.Fatalf("doctor on /proc/x: exit %d\n%s", code, out)
	}
	if _, err := os.Stat("/proc/x"); err == nil {
		t.Fatal("doctor created /proc/x")
	}
}
