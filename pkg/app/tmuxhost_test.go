package app

import (
	"io"
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// A root shell that sets KINGDOM_TMUX_SOCKET as the unit does reaches the
// kingdom user's server by the path start recorded: the name alone would
// resolve to root's own /tmp/tmux-0/.
func TestTmux_TheEnvsNameTakesTheRecordedPath(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.TmuxSocketFile(), []byte("/tmp/tmux-999/kingdom\n"), 0o600)
	t.Setenv(tmux.EnvSocket, "kingdom")
	if got := Tmux(l).Socket; got != "/tmp/tmux-999/kingdom" {
		t.Fatalf("socket %q, want the recorded path", got)
	}
	t.Setenv(tmux.EnvSocket, "/tmp/tmux-999/kingdom")
	if got := Tmux(l).Socket; got != "/tmp/tmux-999/kingdom" {
		t.Fatalf("socket %q, want the recorded path", got)
	}
	t.Setenv(tmux.EnvSocket, "other")
	if got := Tmux(l).Socket; got != "other" {
		t.Fatalf("socket %q, want the env's other socket", got)
	}
	// start itself uses the socket of its environment, and records it.
	t.Setenv(tmux.EnvSocket, "kingdom")
	if got := startTmux(l).Socket; got != "kingdom" {
		t.Fatalf("start's socket %q, want its environment's kingdom", got)
	}
}

// The roles and `chamberlain --once` take the host id start recorded
// when KINGDOM_HOST_ID is not set; start resolves its own (and records
// it).
func TestSetupWith_HostIDStartRecorded(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.ConfigFile(config.SystemFile), []byte("store:\n  kind: files\n  host_id: from-yaml\n"), 0o600)
	os.MkdirAll(l.RoleStateDir(layout.RoleStart), 0o700)
	os.WriteFile(config.HostIDRecord(l.StateDir()), []byte("unit-host\n"), 0o600)
	t.Setenv(config.HostIDEnv, "")
	env, err := SetupWith(layout.RoleChamberlain, l.Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if env.HostID != "unit-host" {
		t.Fatalf("chamberlain's host id %q, want the recorded unit-host", env.HostID)
	}
	env, err = SetupWith(layout.RoleStart, l.Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if env.HostID != "from-yaml" {
		t.Fatalf("start's host id %q, want system.yaml's from-yaml", env.HostID)
	}
	t.Setenv(config.HostIDEnv, "env-host")
	if env, err = SetupWith(layout.RoleKing, l.Base, io.Discard); err != nil || env.HostID != "env-host" {
		t.Fatalf("king's host id %q (%v), want KINGDOM_HOST_ID's env-host", env.HostID, err)
	}
}
