package spawn_test

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
	"github.com/kingdom-dev/kingdom/pkg/spawn"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func privateTmux(t *testing.T) *tmux.Client {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux not installed")
	}
	tc := &tmux.Client{Bin: "tmux", Socket: fmt.Sprintf("kingdom-test-spawn-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { tc.KillServer(context.Background()) })
	return tc
}

// The session's command is soldier-spawn itself with the argv of RunArgs,
// run in the task's workdir with the base dir, the tmux socket and the
// caller's variables in its environment; Launch returns that process.
func TestLaunch_SessionRunsRunArgsWithTheContractEnvironment(t *testing.T) {
	tc := privateTmux(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "work dir")
	os.Mkdir(work, 0o700)
	out := filepath.Join(dir, "dump")
	// Stands in for soldier-spawn: records its pid, argv, cwd and environment.
	bin := filepath.Join(dir, "soldier-spawn")
	script := "#!/bin/sh\n{ echo \"$$\"; pwd -P; for a in \"$@\"; do echo \"arg=$a\"; done; env; } > " + out + ".tmp && mv " + out + ".tmp " + out + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	p := spawn.Params{BaseDir: dir, TaskID: "task-20261125-020", General: "gen-a", PromptFile: filepath.Join(dir, "p.md"),
		Workdir: work, SoldierID: "soldier-1-cd", Resume: "r-1", Engine: "command"}
	got, err := spawn.Launch(context.Background(), tc, bin, p, map[string]string{spawn.EnvBinDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != p.SoldierID {
		t.Errorf("Launch id %q, want %q", got.ID, p.SoldierID)
	}
	var dump string
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, err := os.ReadFile(out); err == nil {
			dump = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's command never ran")
		}
		time.Sleep(10 * time.Millisecond) // a real tmux session starting
	}
	lines := strings.Split(dump, "\n")
	if lines[0] != fmt.Sprint(got.PID) {
		t.Errorf("Launch pid %d, the session's process is %s", got.PID, lines[0])
	}
	if lines[1] != work {
		t.Errorf("cwd %q, want the workdir %q", lines[1], work)
	}
	var args []string
	for _, a := range spawn.RunArgs(bin, p)[1:] {
		args = append(args, "arg="+a)
	}
	if strings.Join(lines[2:2+len(args)], "\n") != strings.Join(args, "\n") {
		t.Errorf("argv:\n%s\nwant:\n%s", strings.Join(lines[2:2+len(args)], "\n"), strings.Join(args, "\n"))
	}
	for _, want := range []string{layout.EnvBase + "=" + dir, tmux.EnvSocket + "=" + tc.Socket, spawn.EnvBinDir + "=" + dir} {
		if !strings.Contains(dump, "\n"+want+"\n") {
			t.Errorf("session environment lacks %q:\n%s", want, dump)
		}
	}
}

// Ids that become paths and session names are checked before tmux runs.
func TestLaunch_RefusesBadIDsBeforeTmux(t *testing.T) {
	tc := &tmux.Client{Bin: "/nonexistent/tmux"}
	ok := spawn.Params{BaseDir: "/b", TaskID: "task-20261125-020", General: "gen-a", PromptFile: "/p", Workdir: "/w", SoldierID: "soldier-1-cd"}
	for name, mutate := range map[string]func(*spawn.Params){
		"task":    func(p *spawn.Params) { p.TaskID = "../etc" },
		"general": func(p *spawn.Params) { p.General = "Gen A" },
		"soldier": func(p *spawn.Params) { p.SoldierID = "soldier/../x" },
		"prompt":  func(p *spawn.Params) { p.PromptFile = "" },
	} {
		p := ok
		mutate(&p)
		if _, err := spawn.Launch(context.Background(), tc, "/bin/soldier-spawn", p, nil); err == nil || strings.Contains(err.Error(), "tmux") {
			t.Errorf("%s: Launch(%+v) = %v; want a refusal before tmux", name, p, err)
		}
	}
	// A fresh soldier id is made when none is given; it reaches tmux.
	p := ok
	p.SoldierID = ""
	if _, err := spawn.Launch(context.Background(), tc, "/bin/soldier-spawn", p, nil); err == nil || !strings.Contains(err.Error(), "spawn soldier soldier-") {
		t.Errorf("Launch without a soldier id = %v; want tmux's failure naming a fresh soldier id", err)
	}
}

// $KINGDOM_BIN_DIR wins when it holds an executable soldier-spawn; a
// non-executable file there is skipped; the fallback is $BASE_DIR/bin.
func TestFindBinary_BinDirThenBaseBin(t *testing.T) {
	l := layout.New(t.TempDir())
	binDir := t.TempDir()
	t.Setenv(spawn.EnvBinDir, binDir)
	want := filepath.Join(l.Bin(), spawn.BinaryName)
	if got := spawn.FindBinary(l); got != want {
		t.Errorf("nothing installed: FindBinary = %q, want %q", got, want)
	}
	p := filepath.Join(binDir, spawn.BinaryName)
	os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600)
	if got := spawn.FindBinary(l); got != want {
		t.Errorf("non-executable in KINGDOM_BIN_DIR: FindBinary = %q, want %q", got, want)
	}
	os.Chmod(p, 0o700)
	if got := spawn.FindBinary(l); got != p {
		t.Errorf("FindBinary = %q, want %q", got, p)
	}
}
