package soldier

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// The soldier's session asks for one processor, and the soldier gives its
// engine the GOMAXPROCS the session would have had: set, set empty, or
// unset.
func TestSoldierProcs_SessionGetsOneAndTheEngineTheOriginal(t *testing.T) {
	for _, c := range []struct {
		name string
		set  bool
		val  string
	}{{"unset", false, ""}, {"set", true, "3"}, {"set empty", true, ""}} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envGOMAXPROCS, "x") // restored after the test
			if c.set {
				os.Setenv(envGOMAXPROCS, c.val)
			} else {
				os.Unsetenv(envGOMAXPROCS)
			}
			e := map[string]string{}
			soldierProcsEnv(e)
			if e[envGOMAXPROCS] != "1" {
				t.Fatalf("session env %v, want GOMAXPROCS=1", e)
			}
			// The soldier's process: the session's environment.
			t.Setenv(EnvSoldierProcs, e[EnvSoldierProcs])
			os.Setenv(envGOMAXPROCS, e[envGOMAXPROCS])
			RestoreEnv()
			v, ok := os.LookupEnv(envGOMAXPROCS)
			if ok != c.set || v != c.val {
				t.Errorf("GOMAXPROCS after RestoreEnv = %q (set %v), want %q (set %v)", v, ok, c.val, c.set)
			}
			if _, ok := os.LookupEnv(EnvSoldierProcs); ok {
				t.Error("the mark is still in the environment")
			}
		})
	}
	// A caller's own GOMAXPROCS for the session stands.
	e := map[string]string{envGOMAXPROCS: "4"}
	soldierProcsEnv(e)
	if e[envGOMAXPROCS] != "4" || e[EnvSoldierProcs] != "" {
		t.Errorf("session env %v, want the caller's GOMAXPROCS=4 and no mark", e)
	}
}

// The soldier's session (real tmux, private socket) starts its command
// with GOMAXPROCS=1 and the mark RestoreEnv reads.
func TestLaunch_SessionStartsWithOneProcessor(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	tc := &tmux.Client{Socket: fmt.Sprintf("kingdom-test-soldier-%d", os.Getpid())}
	t.Cleanup(func() { tc.KillServer(context.Background()) })
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	// Stands in for soldier-spawn: records the environment it was started with.
	bin := filepath.Join(dir, "soldier-spawn")
	os.WriteFile(bin, []byte("#!/bin/sh\nenv > "+out+".tmp && mv "+out+".tmp "+out+"\n"), 0o700)
	t.Setenv(envGOMAXPROCS, "7") // the general's own, and so the session's without Launch
	p := Params{BaseDir: dir, TaskID: "task-20261125-020", General: "gen-a", PromptFile: filepath.Join(dir, "p.md"),
		Workdir: dir, SoldierID: "soldier-1-cd"}
	if _, err := Launch(context.Background(), tc, bin, p, nil); err != nil {
		t.Fatal(err)
	}
	var env string
	for deadline := time.Now().Add(10 * time.Second); ; {
		if b, err := os.ReadFile(out); err == nil {
			env = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's command never ran")
		}
		time.Sleep(10 * time.Millisecond) // a real tmux session starting
	}
	for _, want := range []string{"GOMAXPROCS=1\n", EnvSoldierProcs + "==7\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("session environment lacks %q:\n%s", want, env)
		}
	}
}
