package soldier

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runEngine is the engine's process: argv, dir, env and stdin as given,
// both outputs copied, the exit code reported; a binary that cannot be
// started is an error naming it. A nil environment is an empty one, never
// the soldier's own.
func TestRunEngine_RunsTheEngineAsGiven(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "prompt")
	os.WriteFile(in, []byte("the prompt"), 0o600)
	f, _ := os.Open(in)
	defer f.Close()
	var out, errb bytes.Buffer
	code, interrupted, err := runEngine(context.Background(), "/bin/sh",
		[]string{"sh", "-c", `pwd; echo "$X"; cat; echo oops >&2; exit 3`}, dir, []string{"X=from-env"}, f, &out, &errb, nil)
	if err != nil || interrupted || code != 3 {
		t.Fatalf("code %d, interrupted %v, err %v", code, interrupted, err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if got := out.String(); got != real+"\nfrom-env\nthe prompt" {
		t.Errorf("stdout %q", got)
	}
	if errb.String() != "oops\n" {
		t.Errorf("stderr %q", errb.String())
	}
	// No stdin given: /dev/null.
	out.Reset()
	if code, _, err := runEngine(context.Background(), "/bin/cat", []string{"cat"}, dir, nil, nil, &out, &errb, nil); err != nil || code != 0 || out.Len() != 0 {
		t.Errorf("cat of no stdin: code %d, err %v, out %q", code, err, out.String())
	}
	// No environment given: none at all.
	t.Setenv("KINGDOM_SOLDIER_TEST_SECRET", "s3cret")
	out.Reset()
	if _, _, err := runEngine(context.Background(), "/bin/sh", []string{"sh", "-c", "env"}, dir, nil, nil, &out, &errb, nil); err != nil || strings.Contains(out.String(), "s3cret") {
		t.Errorf("nil env: err %v, the engine saw %q", err, out.String())
	}
	_, _, err = runEngine(context.Background(), "/nonexistent/agent", []string{"agent"}, dir, nil, nil, &out, &errb, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/agent") {
		t.Errorf("missing binary: err %v", err)
	}
}

// The end of ctx (a petition's timeout) and a stop signal kill the
// engine's whole group; only the signal counts as an interruption.
func TestRunEngine_ContextAndSignalKillTheGroup(t *testing.T) {
	for _, by := range []string{"context", "signal"} {
		t.Run(by, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sigs := make(chan os.Signal, 1)
			go func() {
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
					if _, err := os.Stat(filepath.Join(dir, "child")); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond) // the engine is a real process starting
				}
				if by == "context" {
					cancel()
				} else {
					sigs <- syscall.SIGHUP
				}
			}()
			var out, errb bytes.Buffer
			code, interrupted, err := runEngine(ctx, "/bin/sh",
				[]string{"sh", "-c", `sleep 300 & echo $! > child.tmp; mv child.tmp child; wait`}, dir, nil, nil, &out, &errb, sigs)
			if err != nil || code != -1 || interrupted != (by == "signal") {
				t.Fatalf("code %d, interrupted %v, err %v", code, interrupted, err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "child"))
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			gone := func() bool {
				st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
				return err != nil || strings.Contains(string(st), ") Z ")
			}
			for deadline := time.Now().Add(60 * time.Second); !gone() && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond) // the kernel delivers the group kill
			}
			if pid <= 0 || !gone() {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the engine's child %d outlived it", pid)
			}
		})
	}
}

// A stop signal while the engine's output is still drained (it exited, but
// a child that left its process group holds stdout) still counts: the
// soldier reports itself interrupted and publishes nothing.
func TestRunEngine_SignalDuringTheOutputDrainCounts(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	dir := t.TempDir()
	sigs := make(chan os.Signal, 1)
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			if _, err := os.Stat(filepath.Join(dir, "exited")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) // the engine is a real process ending
		}
		time.Sleep(200 * time.Millisecond) // inside the 2 s drain the escaped child keeps open
		sigs <- syscall.SIGHUP
	}()
	var out, errb bytes.Buffer
	code, interrupted, err := runEngine(context.Background(), "/bin/sh",
		[]string{"sh", "-c", `setsid sleep 3 & touch exited; exit 0`}, dir, nil, nil, &out, &errb, sigs)
	if err != nil {
		t.Fatalf("err %v", err)
	}
	if !interrupted {
		t.Fatalf("a stop signal during the output drain was missed (code %d)", code)
	}
}
