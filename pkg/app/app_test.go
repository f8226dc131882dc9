package app

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

func TestTmux_UsesTheSocketStartRecorded(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.TmuxSocketFile(), []byte("kingdom-prod\n"), 0o600)
	os.Unsetenv("KINGDOM_TMUX_SOCKET")
	if got := Tmux(l).Socket; got != "kingdom-prod" {
		t.Fatalf("socket %q, want the recorded kingdom-prod", got)
	}
	t.Setenv("KINGDOM_TMUX_SOCKET", "other")
	if got := Tmux(l).Socket; got != "other" {
		t.Fatalf("socket %q, want the env's other", got)
	}
}

func TestExitCode_MapsErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("x"), 1},
		{fmt.Errorf("run: %w", &lockfile.HeldError{Path: "p", PID: 7}), 4},
		{&ConfigError{Err: errors.New("bad")}, 2},
		{fmt.Errorf("load: %w", &config.Error{File: "king.yaml", Key: "retry", Msg: "bad"}), 2},
		{&CodeError{Code: 3}, 3},
	} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestSetup_RefusesALooseEnvFile(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.EnvFile(), []byte("GH_TOKEN=x\n"), 0o644)
	_, err := SetupWith("king", l.Base, os.Stdout)
	if ExitCode(err) != ExitConfig {
		t.Fatalf("Setup with a 0644 kingdom.env: %v (exit %d), want a config error", err, ExitCode(err))
	}
}
