package envoy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// smallDisk mounts a 2 MiB tmpfs for the test (unmounted in cleanup).
func smallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file until the filesystem is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Fill the last partial page too.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	return p
}

// On a full disk the envoy posts nothing it cannot record
// (before: the same message every tick), alerts once, and sends the message
// exactly once when space comes back.
func TestOutbound_FullDiskHoldsSendsAlertsOnceAndPostsOnce(t *testing.T) {
	h := newHarness(t, setup{base: smallDisk(t)})
	id := "msg-" + task + "-start"
	h.put(message(id, "thread_start", task))
	filler := fill(t, h.l.Base)
	for range 5 {
		_ = h.e.Tick(context.Background()) // ticks fail while the disk is full
	}
	calls := h.fake.Calls("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("postMessage calls on a full disk = %d, want 1 (the alert)", len(calls))
	}
	if txt := calls[0].Form.Get("text"); !strings.Contains(txt, "outbound messages are held") {
		t.Errorf("the one post is not the alert: %q", txt)
	}
	if got := h.msgState(id); got != layout.Pending {
		t.Errorf("message state = %q, want pending", got)
	}
	os.Remove(filler)
	for range 3 {
		if err := h.e.Tick(context.Background()); err != nil {
			t.Fatalf("tick after space came back: %v", err)
		}
	}
	calls = h.fake.Calls("chat.postMessage")
	if len(calls) != 2 {
		t.Fatalf("postMessage calls = %d, want 2 (alert, then the message once)", len(calls))
	}
	if txt := calls[1].Form.Get("text"); !strings.Contains(txt, "content of "+id) {
		t.Errorf("second post = %q, want the message", txt)
	}
	if got := h.msgState(id); got != layout.Sent {
		t.Errorf("message state = %q, want sent", got)
	}
}
