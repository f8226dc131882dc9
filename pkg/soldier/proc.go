package soldier

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"
)

// engineWaitDelay bounds how long the engine's output is still read after
// it exited: a background child it left holding stdout (a dev server the
// agent started) must not hang the soldier until its timeout.
const engineWaitDelay = 2 * time.Second

// runEngine starts argv (path resolved) in dir with env, in a process group
// of its own (so its whole tree can be killed at once) and with
// Pdeathsig SIGKILL (it dies with this runner even if the runner is
// SIGKILLed); stdout and stderr are copied to the writers, stdin is the
// given file (nil: /dev/null). A signal on sigs or ctx's end kills the
// group; so does the engine's exit (no background leftovers). It returns
// the exit code (-1 when killed by a signal) and whether sigs ended it; an
// error with started false is a failure to start it.
//
// It is os/exec's CommandContext with WaitDelay, without what a process
// that starts one child pays for it on every task (issue #17): os/exec
// probes pidfd support by forking a throwaway child on its first start,
// and copies each writer through a goroutine of its own.
func runEngine(ctx context.Context, path string, argv []string, dir string, env []string, stdin *os.File,
	stdout, stderr io.Writer, sigs <-chan os.Signal) (code int, interrupted, started bool, err error) {
	if err := ctx.Err(); err != nil {
		return -1, false, false, err
	}
	if stdin == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return -1, false, false, err
		}
		defer f.Close()
		stdin = f
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, false, false, err
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return -1, false, false, err
	}
	defer errR.Close()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir: dir, Env: env, Files: []uintptr{stdin.Fd(), outW.Fd(), errW.Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		return -1, false, false, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stderr, errR); copied <- struct{}{} }()
	killed := make(chan bool, 1)
	waited := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-sigs:
			killed <- true
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		case <-ctx.Done():
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		case <-waited:
		}
	}()
	go func() { _, _ = io.Copy(stdout, outR); copied <- struct{}{} }()
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	// Whatever the engine left running in its group goes with it; its
	// output is read until it ends or for engineWaitDelay at most. A stop
	// signal meanwhile still counts (the watcher runs until the drain ends).
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	delay := time.NewTimer(engineWaitDelay)
	defer delay.Stop()
	for n := 0; n < 2; {
		select {
		case <-copied:
			n++
		case <-delay.C:
			outR.Close()
			errR.Close()
		}
	}
	close(waited)
	<-watched // its verdict is in killed
	select {
	case interrupted = <-killed:
	default:
	}
	code = -1
	if ws.Exited() {
		code = ws.ExitStatus()
	}
	if err != nil {
		return code, interrupted, true, os.NewSyscallError("wait4", err)
	}
	return code, interrupted, true, nil
}
