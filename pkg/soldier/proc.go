package soldier

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// engineWaitDelay bounds how long the engine's output is still read after
// it exited: a background child it left holding stdout (a dev server the
// agent started) must not hang the soldier until its timeout.
const engineWaitDelay = 2 * time.Second

// stopSignals end a soldier: tmux kill-session's SIGHUP, and SIGTERM or
// SIGINT from an operator.
var stopSignals = []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT}

// errStopped is the cause of an engine run ended by a stop signal.
var errStopped = errors.New("stop signal")

// runEngine runs argv (path resolved) in dir with env, in a process group
// of its own, so its whole tree is killed at once, and with Pdeathsig
// SIGKILL, so it dies with this runner even if the runner is SIGKILLed.
// stdout and stderr are copied to the writers; stdin is the given file
// (nil: /dev/null). A signal on stop or the end of ctx kills the group, and
// so does the engine's exit: it leaves nothing running behind it. It
// returns the exit code (-1 when killed by a signal) and whether stop ended
// it; an error means the engine did not start.
func runEngine(ctx context.Context, path string, argv []string, dir string, env []string, stdin *os.File,
	stdout, stderr io.Writer, stop <-chan os.Signal) (code int, interrupted bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cmd := exec.CommandContext(ctx, path)
	cmd.Args, cmd.Dir, cmd.Env = argv, dir, env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would hand the engine our whole environment
	}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = engineWaitDelay
	if err := cmd.Start(); err != nil {
		return -1, false, err
	}
	waited := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
			cancel(errStopped)
		case <-waited:
		}
	}()
	// Wait's error says nothing the exit status does not: a non-zero exit,
	// a kill by Cancel, or output cut off after WaitDelay.
	_ = cmd.Wait()
	close(waited)
	<-watched
	// Whatever the engine left running in its group goes with it.
	_ = killGroup(cmd.Process.Pid)
	select {
	case <-stop: // one that came as the engine ended
		interrupted = true
	default:
		interrupted = errors.Is(context.Cause(ctx), errStopped)
	}
	return cmd.ProcessState.ExitCode(), interrupted, nil
}

// killGroup SIGKILLs process group pgid; a group already gone is done.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// sweepTask kills every process of ours still carrying task's variables
// under base (SPEC §4.6 sets them in the engine's environment): the
// agent's detached children, which the engine's process group no longer
// holds. With adopted (we are their subreaper) they are among our own
// children; otherwise every process of this user is looked at. A machine
// without a delegated cgroup has no tighter net.
func sweepTask(base, task string, adopted bool) {
	vars := map[string]string{layout.EnvBase: base, layout.EnvTaskID: task}
	if adopted {
		proctree.SweepOrphans(vars)
		return
	}
	proctree.Sweep(vars)
}
