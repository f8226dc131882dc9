package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

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

// tree lists every path under base with its owner.
func tree(t *testing.T, base string) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out[p] = fi.Sys().(*syscall.Stat_t).Uid
		}
		return nil
	})
	return out
}

func TestSetupWith_InAnotherUsersTreeWritesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a tree as nobody")
	}
	l := nobodyTree(t)
	os.RemoveAll(l.StateDir()) // what Ensure would recreate
	before := tree(t, l.Base)
	var out strings.Builder
	env, err := SetupWith("chamberlain", l.Base, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !env.ReadOnly {
		t.Fatal("Env.ReadOnly false in a tree owned by nobody, run as root")
	}
	env.Log.Warn("a line that must not create system.log")
	env.Events.Emit("test.event", nil)
	if after := tree(t, l.Base); len(after) != len(before) {
		t.Fatalf("tree changed from %d to %d paths: %v", len(before), len(after), after)
	}
	if !strings.Contains(out.String(), "must not create") {
		t.Fatalf("the log line went nowhere: %q", out.String())
	}
}

func TestSetup_RefusesAnotherUsersTreeNamingBothUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a tree as nobody")
	}
	l := nobodyTree(t)
	var got error
	cmd := &cli.Command{Name: "start", Flags: []cli.Flag{BaseDirFlag()}, Action: func(ctx context.Context, c *cli.Command) error {
		_, got = Setup("start", c)
		return nil
	}}
	if err := cmd.Run(context.Background(), []string{"start", "--base-dir", l.Base}); err != nil {
		t.Fatal(err)
	}
	var oe *OwnerError
	if !errors.As(got, &oe) {
		t.Fatalf("Setup as root in nobody's tree: %v, want an OwnerError", got)
	}
	msg := got.Error()
	for _, want := range []string{"nobody", "root", "runuser -u nobody --"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if _, err := os.Stat(l.LastExit("start")); err == nil {
		t.Error("a refused start recorded its exit in the other user's tree")
	}
}

func TestMain_RecordsARolesFatalErrorForStart(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	p := l.LastExit("king")
	if err := WriteLastExit(p, ExitConfig, errors.New("king.yaml:3: retry.max: want a number, got \"x\" GH_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789"), time.Now()); err != nil {
		t.Fatal(err)
	}
	le, err := ReadLastExit(p)
	if err != nil || le == nil {
		t.Fatalf("ReadLastExit: %v %v", le, err)
	}
	if le.Exit != ExitConfig || !strings.Contains(le.Error, "king.yaml:3") || strings.Contains(le.Error, "ghp_abc") {
		t.Fatalf("last exit %+v: want exit 2, the config error, the token redacted", le)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}
