package tmux_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func privateClient(t *testing.T) *tmux.Client {
	t.Helper()
	c := &tmux.Client{Bin: "tmux", Socket: fmt.Sprintf("kingdom-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { c.KillServer(context.Background()) })
	return c
}

func TestTmux_LifecycleOnPrivateSocket(t *testing.T) {
	ctx := context.Background()
	c := privateClient(t)
	if ss, err := c.List(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("List with no server = %v, %v; want empty, nil", ss, err)
	}
	if ok, err := c.Has(ctx, "king"); ok || err != nil {
		t.Fatalf("Has(king) before start = %v, %v", ok, err)
	}
	dir := t.TempDir()
	if err := c.NewSession(ctx, "king", tmux.NewOptions{Dir: dir, Env: map[string]string{"KINGDOM_X": "1"}}, "sleep", "30"); err != nil {
		t.Fatal(err)
	}
	// A session whose name is a prefix of another must not match it (-t =).
	if err := c.NewSession(ctx, "king-2", tmux.NewOptions{}, "sleep", "30"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Has(ctx, "kin"); ok {
		t.Fatal("Has(kin) matched by prefix")
	}
	ss, err := c.List(ctx)
	if err != nil || len(ss) != 2 {
		t.Fatalf("List = %v, %v", ss, err)
	}
	for _, s := range ss {
		if s.PID <= 0 || s.Created.IsZero() {
			t.Errorf("session %+v lacks pid or creation time", s)
		}
	}
	if err := c.Kill(ctx, "king"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Has(ctx, "king"); ok {
		t.Fatal("king still there after Kill")
	}
	if ok, _ := c.Has(ctx, "king-2"); !ok {
		t.Fatal("Kill(king) killed king-2 too")
	}
	if err := c.Kill(ctx, "nosuch"); err != nil {
		t.Fatalf("Kill of a missing session: %v", err)
	}
}

func TestTmux_ArgvIsNeverAShellString(t *testing.T) {
	ctx := context.Background()
	c := privateClient(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	out := filepath.Join(dir, "out")
	// If the words went through a shell, $(touch …) would run.
	arg := "$(touch " + marker + ")`touch " + marker + "`;touch " + marker
	if err := c.NewSession(ctx, "argv", tmux.NewOptions{}, "/bin/sh", "-c", `printf '%s' "$1" > "$2"`, "sh", arg, out); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
			if string(b) != arg {
				t.Fatalf("argument arrived as %q, want %q", b, arg)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("argument was executed by a shell")
			}
			return
		}
		time.Sleep(20 * time.Millisecond) // waiting for the session's process
	}
	t.Fatal("session never wrote its output")
}

func TestTmux_SingleWordCommandRefused(t *testing.T) {
	c := privateClient(t)
	if err := c.NewSession(context.Background(), "one", tmux.NewOptions{}, "sleep 30"); err == nil {
		t.Fatal("single-word command accepted")
	}
}

// Only tmux's own "no such session" answer means gone: a stalled or failing
// tmux is an error, or a general would kill a soldier that is still working.
func TestTmux_HasNeverMistakesAFailureForGone(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755)
		return p
	}
	ctx := context.Background()
	stalled := &tmux.Client{Bin: write("stalled", "exec sleep 5"), Timeout: 100 * time.Millisecond}
	if ok, err := stalled.Has(ctx, "soldier-1"); err == nil {
		t.Fatalf("stalled tmux: Has = %v, nil; want an error", ok)
	}
	broken := &tmux.Client{Bin: write("broken", "echo 'server exited unexpectedly' >&2; exit 1")}
	if ok, err := broken.Has(ctx, "soldier-1"); err == nil {
		t.Fatalf("failing tmux: Has = %v, nil; want an error", ok)
	}
	gone := &tmux.Client{Bin: write("gone", "echo \"can't find session: =soldier-1\" >&2; exit 1")}
	if ok, err := gone.Has(ctx, "soldier-1"); ok || err != nil {
		t.Fatalf("missing session: Has = %v, %v; want false, nil", ok, err)
	}
}

// Start returns the pid of the session's own process, and the directory
// and environment arrive as given: tmux format-expands -c, so a # in the
// directory must not become a format.
func TestTmux_StartReturnsThePaneProcessAndKeepsDirAndEnv(t *testing.T) {
	ctx := context.Background()
	c := privateClient(t)
	dir := filepath.Join(t.TempDir(), "d #{pane_pid} ## $HOME")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	pid, err := c.Start(ctx, "soldier-1", tmux.NewOptions{Dir: dir, Env: map[string]string{"KINGDOM_X": "x 'y' \"z\""}},
		"/bin/sh", "-c", `printf '%s\n%s\n%s' "$$" "$(pwd -P)" "$KINGDOM_X" > "$1.tmp" && mv "$1.tmp" "$1"; sleep 30`, "sh", out)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d\n%s\nx 'y' \"z\"", pid, dir)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(out); err == nil {
			if string(b) != want {
				t.Fatalf("session wrote %q, want %q", b, want)
			}
			return
		}
		time.Sleep(20 * time.Millisecond) // waiting for the session's process
	}
	t.Fatal("session never wrote its output")
}

// KillServer leaves no dead socket file behind (tmux 3.x does).
func TestTmux_KillServerRemovesTheSocketFile(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	t.Setenv("TMUX_TMPDIR", tmp)
	c := privateClient(t)
	if err := c.NewSession(ctx, "s", tmux.NewOptions{Dir: tmp}, "sleep", "60"); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tmp, fmt.Sprintf("tmux-%d", os.Getuid()), c.Socket)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("no socket at %s while the server runs: %v", sock, err)
	}
	if err := c.KillServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left after KillServer: %v", sock, err)
	}
}

// Killing the server's last session ends the server, and the client may say
// "server exited unexpectedly" for a kill that worked; Kill asks tmux again
// and reports only a session that is still there.
func TestTmux_KillOfTheLastSessionIsNotAFailure(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755)
		return p
	}
	ctx := context.Background()
	ended := &tmux.Client{Bin: write("ended", `case "$1" in
kill-session) echo 'server exited unexpectedly' >&2; exit 1;;
*) echo 'no server running on /tmp/x' >&2; exit 1;;
esac`)}
	if err := ended.Kill(ctx, "soldier-1"); err != nil {
		t.Fatalf("kill that ended the server: %v", err)
	}
	stuck := &tmux.Client{Bin: write("stuck", `case "$1" in
kill-session) echo 'server exited unexpectedly' >&2; exit 1;;
*) exit 0;;
esac`)}
	if err := stuck.Kill(ctx, "soldier-1"); err == nil {
		t.Fatal("kill failed and the session is still there: want an error")
	}
}

func TestTmux_NewSessionRacingAnExitingServerIsRetried(t *testing.T) {
	dir := t.TempDir()
	// The first new-session meets a server that is going away; the second
	// starts a new one. has-session in between finds no server.
	bin := filepath.Join(dir, "tmux")
	os.WriteFile(bin, []byte(`#!/bin/sh
for a in "$@"; do
  case "$a" in
  new-session)
    if [ ! -e "`+dir+`/tried" ]; then : > "`+dir+`/tried"; echo 'server exited unexpectedly' >&2; exit 1; fi
    echo 4242; exit 0;;
  has-session) echo 'no server running on /tmp/x' >&2; exit 1;;
  esac
done
exit 1
`), 0o755)
	c := &tmux.Client{Bin: bin}
	pid, err := c.Start(context.Background(), "soldier-1", tmux.NewOptions{}, "sleep", "1")
	if err != nil || pid != 4242 {
		t.Fatalf("Start = %d, %v; want the retried session's pid 4242", pid, err)
	}
	// A server that keeps failing is an error after the retries.
	always := filepath.Join(dir, "always")
	os.WriteFile(always, []byte("#!/bin/sh\ncase \"$1\" in has-session) echo 'no server running' >&2;; *) echo 'server exited unexpectedly' >&2;; esac\nexit 1\n"), 0o755)
	c = &tmux.Client{Bin: always}
	if _, err := c.Start(context.Background(), "soldier-1", tmux.NewOptions{}, "sleep", "1"); err == nil {
		t.Fatal("a server that always exits: want an error")
	}
}
