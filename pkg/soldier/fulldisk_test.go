package soldier

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// syncBuffer is a log destination read while the soldier writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mountTmpfs mounts a tmpfs of size bytes on dir until the test ends (a
// real full disk, not a simulated error).
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// waitFor polls cond (a guard against a hang, not a speed assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // the soldier runs in another goroutine
	}
}

// fillScript writes the agent's result, then fills the results disk (the
// engine's last act, so the soldier's own publication is what fails).
const fillScript = `printf '{"status":"success","summary":"kept through a full disk"}' > "$1"; cat /dev/zero > "$3/filler" 2>/dev/null; exit 0`

// A full disk when the soldier publishes does not cost the agent's result:
// the staging file stays, the publication is retried (logged once, not per
// attempt), and once space is freed the result is published and only then
// is the staging file removed.
func TestRun_FullDiskPublicationIsRetriedUntilItSucceeds(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	mountTmpfs(t, l.ResultsDir(), 64<<10)
	const task = "task-20261121-010"
	var logs syncBuffer
	type result struct {
		out *Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runCommand(t, context.Background(), base, task, fillScript, func(o *RunOptions) {
			o.Log = slog.New(slog.NewTextHandler(&logs, nil))
		})
		done <- result{out, err}
	}()
	waitFor(t, "the failed publication's log line", func() bool {
		return strings.Contains(logs.String(), "no space left on device")
	})
	if _, err := os.Stat(l.ResultStaging(task)); err != nil {
		t.Fatalf("the agent's staging file is gone while its result is unpublished: %v", err)
	}
	if _, err := os.Lstat(l.ResultRaw(task)); !os.IsNotExist(err) {
		t.Fatalf("raw result on a full disk: %v", err)
	}
	// Sleeping lets the retries (100 ms, then 200 ms) fail again with the
	// same error before the disk is freed: it must still be one log line.
	time.Sleep(400 * time.Millisecond)
	if err := os.Remove(filepath.Join(l.ResultsDir(), "filler")); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second): // a guard, not a speed assertion
		t.Fatal("soldier did not publish after the disk was freed")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	m := readRaw(t, l.ResultRaw(task))
	if m["status"] != "success" || m["summary"] != "kept through a full disk" || m[doc.RawOrigin] != "agent result "+l.ResultStaging(task) {
		t.Fatalf("raw result %v, want the agent's", m)
	}
	if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
		t.Errorf("staging file still there after the publication: %v", err)
	}
	out := logs.String()
	if n := strings.Count(out, "no space left on device"); n != 1 {
		t.Errorf("the full disk was logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "raw result published") {
		t.Errorf("the recovery was not logged:\n%s", out)
	}
}

// A soldier stopped while its disk is still full gives up, and leaves the
// agent's staging file (the general's finish or the next attempt's cleanup
// deals with it; the result itself is not thrown away by the soldier).
func TestRun_FullDiskPublicationEndsWithTheContextAndKeepsTheStagingFile(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	mountTmpfs(t, l.ResultsDir(), 64<<10)
	const task = "task-20261121-011"
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runCommand(t, ctx, base, task, fillScript, func(o *RunOptions) {
			o.Log = slog.New(slog.NewTextHandler(&logs, nil))
		})
		done <- err
	}()
	waitFor(t, "the failed publication's log line", func() bool {
		return strings.Contains(logs.String(), "no space left on device")
	})
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second): // a guard, not a speed assertion
		t.Fatal("soldier did not stop with its context")
	}
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Run = %v, want the publication's error", err)
	}
	if b, err := os.ReadFile(l.ResultStaging(task)); err != nil || !strings.Contains(string(b), "kept through a full disk") {
		t.Fatalf("staging file %q, %v: want the agent's result kept", b, err)
	}
}
