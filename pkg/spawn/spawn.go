// Package spawn is the contract between a general and soldier-spawn (SPEC
// §4.6): the parameters of one task attempt (Params), the argv of the
// soldier session's command (RunArgs), where the soldier-spawn binary is
// (FindBinary), and Launch, which creates the session `soldier-<id>`
// through tmux. The general starts soldiers with it; cmd/soldier-spawn
// reads the same flags back. It imports no role.
package spawn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// EnvBinDir names the directory holding the kingdom binaries (set by start).
const EnvBinDir = "KINGDOM_BIN_DIR"

// BinaryName is the soldier-spawn executable's name.
const BinaryName = "soldier-spawn"

// FindBinary locates the soldier-spawn executable: $KINGDOM_BIN_DIR, else
// next to the running executable, else $BASE_DIR/bin.
func FindBinary(l layout.Layout) string {
	var dirs []string
	if d := os.Getenv(EnvBinDir); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, l.Bin())
	for _, d := range dirs {
		p := filepath.Join(d, BinaryName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return filepath.Join(l.Bin(), BinaryName)
}

// Params identify one task attempt; they are the flags of both
// `soldier-spawn` and `soldier-spawn run`.
type Params struct {
	BaseDir    string
	TaskID     string
	General    string
	PromptFile string
	Workdir    string
	SoldierID  string
	Resume     string // engine resume token
	Engine     string // "" = system.yaml runtime.engine
}

// Check validates the ids that become paths or session names.
func (p Params) Check() error {
	if err := ids.Check(p.TaskID); err != nil {
		return fmt.Errorf("task: %w", err)
	}
	if p.General != "" && !ids.ValidGeneral(p.General) {
		return fmt.Errorf("general %q: %w", p.General, ids.ErrInvalid)
	}
	if err := ids.Check(p.SoldierID); err != nil {
		return fmt.Errorf("soldier id: %w", err)
	}
	if p.PromptFile == "" || p.Workdir == "" {
		return errors.New("prompt and workdir are required")
	}
	return nil
}

// RunArgs is the argv of the soldier session: `<bin> run --base-dir B …`.
func RunArgs(bin string, p Params) []string {
	a := []string{bin, "run", "--base-dir", p.BaseDir, "--task", p.TaskID, "--general", p.General,
		"--prompt", p.PromptFile, "--workdir", p.Workdir, "--soldier-id", p.SoldierID}
	if p.Resume != "" {
		a = append(a, "--resume", p.Resume)
	}
	if p.Engine != "" {
		a = append(a, "--engine", p.Engine)
	}
	return a
}

// Launched is a soldier just started: its id (the tmux session) and the
// pid of its `soldier-spawn run` process (0 if tmux did not say).
type Launched struct {
	ID  string
	PID int
}

// Launch creates the soldier's tmux session running `bin run …` (argv,
// never a shell string) in p.Workdir. p.SoldierID names the session; empty,
// a fresh one is made. env is set in the session (tmux -e), with
// KINGDOM_BASE_DIR and the client's tmux socket added: a session gets the
// tmux server's environment, not the caller's (SPEC §9.13).
func Launch(ctx context.Context, tc *tmux.Client, bin string, p Params, env map[string]string) (Launched, error) {
	if p.SoldierID == "" {
		p.SoldierID = ids.Soldier(time.Now())
	}
	if err := p.Check(); err != nil {
		return Launched{}, fmt.Errorf("spawn soldier for %s: %w", p.TaskID, err)
	}
	e := map[string]string{layout.EnvBase: p.BaseDir}
	maps.Copy(e, env)
	if s := tc.Socket; s != "" {
		e[tmux.EnvSocket] = s
	}
	pid, err := tc.Start(ctx, p.SoldierID, tmux.NewOptions{Dir: p.Workdir, Env: e}, RunArgs(bin, p)...)
	if err != nil {
		return Launched{}, fmt.Errorf("spawn soldier %s for %s: %w", p.SoldierID, p.TaskID, err)
	}
	return Launched{ID: p.SoldierID, PID: pid}, nil
}
