package tmux_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// A service user's shell often has no UTF-8 locale, and tmux then prints
// a tab of a -F format as "_": List must still see each session by name
// (`start stop` once stopped nothing and `start status` called seven
// live roles down, their names read as "king_1796163354_12965").
func TestList_WithoutAUTF8Locale(t *testing.T) {
	t.Setenv("LC_ALL", "C")
	t.Setenv("LANG", "C")
	ctx := context.Background()
	c := privateClient(t)
	for _, n := range []string{"king", "gen-pr"} {
		if err := c.NewSession(ctx, n, tmux.NewOptions{}, "sleep", "30"); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range ss {
		got[s.Name] = true
		if s.PID <= 0 || s.Created.IsZero() {
			t.Errorf("session %+v lacks pid or creation time", s)
		}
	}
	if !got["king"] || !got["gen-pr"] || len(got) != 2 {
		t.Fatalf("List = %+v, want king and gen-pr", ss)
	}
}

// fakeTmux is a tmux that fails as a real one does with msg.
func fakeTmux(t *testing.T, msg string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tmux")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+msg+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A socket this user may not open is not "no session": the error says
// the socket is unreachable and names its path.
func TestList_UnreachableSocketIsNamedNotNoSession(t *testing.T) {
	ctx := context.Background()
	c := &tmux.Client{Bin: fakeTmux(t, "error connecting to /tmp/tmux-1000/kingdom (Permission denied)"), Socket: "/tmp/tmux-1000/kingdom"}
	_, err := c.List(ctx)
	if err == nil || errors.Is(err, tmux.ErrNoSession) || !errors.Is(err, tmux.ErrUnreachable) {
		t.Fatalf("List = %v, want ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), "tmux socket /tmp/tmux-1000/kingdom unreachable") {
		t.Fatalf("error %q does not name the socket", err)
	}
	if _, err := c.Has(ctx, "king"); !errors.Is(err, tmux.ErrUnreachable) {
		t.Fatalf("Has = %v, want ErrUnreachable", err)
	}
	// No server at all is still an empty list.
	c.Bin = fakeTmux(t, "error connecting to /tmp/tmux-1000/kingdom (No such file or directory)")
	if ss, err := c.List(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("List with no server = %v, %v", ss, err)
	}
	c.Bin = fakeTmux(t, "no server running on /tmp/tmux-1000/kingdom")
	if ss, err := c.List(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("List with a stale socket = %v, %v", ss, err)
	}
}
