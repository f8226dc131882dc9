package operator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/start"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func TestSocketPath_IsTmuxsOwnForAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a tmux server as nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	dir, err := os.MkdirTemp("", "ks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chown(dir, 65534, 65534)
	socket := fmt.Sprintf("k%d", os.Getpid())
	nobody := func(a ...string) string {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", "tmux", "-L", socket}, a...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMUX_TMPDIR=" + dir}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v as nobody: %v: %s", a, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	nobody("new-session", "-d", "-s", "king", "--", "sleep", "300")
	t.Cleanup(func() { nobody("kill-server") })
	want := nobody("display-message", "-p", "#{socket_path}")
	if got := start.SocketPath(socket, dir, 65534); got != want {
		t.Fatalf("SocketPath = %q, tmux serves nobody's server on %q", got, want)
	}
	// The status a root shell reads sees the owner's roles alive.
	l := layout.New(filepath.Join(dir, "base"))
	l.Ensure()
	st, err := ReadStatus(context.Background(), l, &tmux.Client{Socket: want}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Roles {
		if r.Name == "king" && !r.SessionAlive {
			t.Fatalf("king shown down from root's shell: %+v", r)
		}
	}
}

// start status and start tasks typed in a root shell read the kingdom
// user's tree without leaving a file of root's in it.
func TestStatusAndTasks_FromAnotherUserWriteNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a tree as nobody")
	}
	l := layout.New(filepath.Join(t.TempDir(), "kingdom"))
	l.Ensure()
	// The tree as start leaves it: its store opened once.
	if st, err := files.Open(l, "test-host"); err != nil {
		t.Fatal(err)
	} else {
		st.Close()
	}
	// After a rotation: what a writer would recreate.
	os.Remove(l.SystemLog())
	walk := func() map[string]bool {
		m := map[string]bool{}
		filepath.Walk(l.Base, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				os.Lchown(p, 65534, 65534)
				m[p] = true
			}
			return nil
		})
		return m
	}
	before := walk()
	if _, err := ReadStatus(context.Background(), l, &tmux.Client{Socket: fmt.Sprintf("none-%d", os.Getpid())}, time.Now()); err != nil {
		t.Fatal(err)
	}
	sh, err := OpenShared(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := ListTasks(t.Context(), sh, time.Now(), RecentWindow); err != nil {
		t.Fatal(err)
	}
	for p := range walk() {
		if !before[p] {
			t.Errorf("reading created %s", p)
		}
	}
}
