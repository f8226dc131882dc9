package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// The real king binary: a second instance is refused naming the holder's
// pid (exit 4); a --standby one takes over once the holder is SIGKILLed.
func TestKingBinary_LeaderLockAndStandby(t *testing.T) {
	k := NewKingdom(t, nil)
	king := filepath.Join(binDir, "king")
	first := exec.Command(king, "--base-dir", k.L.Base)
	first.Env = cleanEnv()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	k.Eventually("first king to lead", 20*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("king"))
		return held && pid == first.Process.Pid
	})

	second := exec.Command(king, "--base-dir", k.L.Base)
	second.Env = cleanEnv()
	var stderr bytes.Buffer
	second.Stderr = &stderr
	err := second.Run()
	if code := second.ProcessState.ExitCode(); code != 4 {
		t.Fatalf("second king: exit %d (%v), want 4", code, err)
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("pid %d", first.Process.Pid)) {
		t.Fatalf("refusal %q does not name pid %d", stderr.String(), first.Process.Pid)
	}

	standby := exec.Command(king, "--base-dir", k.L.Base, "--standby")
	standby.Env = cleanEnv()
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { standby.Process.Signal(syscall.SIGTERM); standby.Wait() }()
	time.Sleep(500 * time.Millisecond) // the standby is waiting on the lock
	if _, pid := lockfile.Held(k.L.LeaderLock("king")); pid != first.Process.Pid {
		t.Fatalf("lock moved to pid %d while the holder lives", pid)
	}
	killed := time.Now()
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	k.Eventually("standby to take over", 10*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("king"))
		return held && pid == standby.Process.Pid
	})
	t.Logf("standby king took over %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
}
