package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// nobody is the uid the tests give a kingdom that is not root's.
const nobody = 65534

// asNobody runs argv as uid/gid 65534 with a clean environment plus env;
// it skips the test where that is impossible (not root, no setpriv).
func asNobody(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as another user")
	}
	sp, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	cmd := exec.Command(sp, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--"}, argv...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v as nobody: %v: %s", argv, err, out)
	}
	return strings.TrimSpace(string(out))
}

// nobodyTree is a base dir owned by nobody, as /opt/kingdom is owned by the
// kingdom user, created through Ensure by its owner.
func nobodyTree(t *testing.T) layout.Layout {
	t.Helper()
	// A short path: a unix socket's path has at most 107 bytes, and
	// t.TempDir's names are long.
	dir, err := os.MkdirTemp("", "kq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // nobody must get through to the base dir
	base := filepath.Join(dir, "kingdom")
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestTmux_ReachesAnotherUsersServerByTheRecordedPath(t *testing.T) {
	l := nobodyTree(t)
	tmpdir := filepath.Join(l.Base, "tmux")
	socket := fmt.Sprintf("k%d", os.Getpid())
	env := []string{"TMUX_TMPDIR=" + tmpdir}
	asNobody(t, nil, "mkdir", "-m", "0700", tmpdir)
	asNobody(t, env, "tmux", "-L", socket, "new-session", "-d", "-s", "king", "--", "sleep", "300")
	t.Cleanup(func() { asNobody(t, env, "tmux", "-L", socket, "kill-server") })
	path := asNobody(t, env, "tmux", "-L", socket, "display-message", "-p", "#{socket_path}")
	// What start (as the owner) recorded; this shell is root's.
	os.WriteFile(l.TmuxSocketFile(), []byte(path+"\n"), 0o600)
	t.Setenv("KINGDOM_TMUX_SOCKET", "")
	os.Unsetenv("KINGDOM_TMUX_SOCKET")
	ss, err := Tmux(l).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Name != "king" {
		t.Fatalf("root sees sessions %+v on %s, want nobody's king", ss, path)
	}
}
