package start

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func TestRecordSocket_RecordsThePathTmuxUses(t *testing.T) {
	// A short dir: a socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "ks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(EnvTmuxTmpdir, filepath.Join(dir, "run")) // not there yet: start creates it
	l := layout.New(filepath.Join(dir, "base"))
	l.Ensure()
	tc := &tmux.Client{Socket: fmt.Sprintf("k%d", os.Getpid())}
	t.Cleanup(func() { tc.KillServer(context.Background()) })
	got, err := RecordSocket(l, tc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(l.TmuxSocketFile())
	if strings.TrimSpace(string(b)) != got {
		t.Fatalf("recorded %q, returned %q", b, got)
	}
	if err := tc.NewSession(context.Background(), "king", tmux.NewOptions{}, "sleep", "300"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tmux", "-L", tc.Socket, "display-message", "-p", "#{socket_path}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("recorded socket %q, tmux serves on %q", got, want)
	}
	// What a shell of any user does with it: reach the server by path.
	if has, err := (&tmux.Client{Socket: got}).Has(context.Background(), "king"); err != nil || !has {
		t.Fatalf("king on %s: %v %v, want found", got, has, err)
	}
}
