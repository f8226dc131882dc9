package tmux

import "time"

// UseControlAt attaches c's control client to target (a pane id) with the
// given attach flags: tests run outside tmux, so UseControl's environment
// check would refuse; "ignore-size" alone lets %output through.
func UseControlAt(c *Client, target, flags string) { c.useControl(target, flags) }

// ControlPID is the pid of c's running control client (0: none).
func ControlPID(c *Client) int {
	if c.ctl == nil {
		return 0
	}
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	if c.ctl.conn == nil {
		return 0
	}
	select {
	case <-c.ctl.conn.dead:
		return 0
	default:
	}
	return c.ctl.conn.cmd.Process.Pid
}

// Execs is how many tmux client processes ran commands so far.
func Execs() int64 { return execs.Load() }

// IsOwnServer exposes the TMUX check of UseControl.
func IsOwnServer(c *Client, tmuxEnv string) bool { return c.isOwnServer(tmuxEnv) }

// SetControlRetry sets how long after a failed connect c waits before the
// next try (tests: the default 5 s is long).
func SetControlRetry(c *Client, d time.Duration) { c.ctl.retry = d }
