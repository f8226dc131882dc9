// Package tmux is the only code that runs tmux. Every call goes through a
// Client that honors KINGDOM_TMUX_SOCKET (→ tmux -L <socket>), targets
// sessions by exact name (-t =name, SPEC §9.13) and passes commands as argv
// words, never as a shell string built from data. A failure to reach a
// server (ErrUnreachable) names the socket's path and is never taken for
// "no session"; only a missing server is.
//
// Each command is one tmux process (os/exec, bounded by Client.Timeout)
// whose environment holds no secret (redact.CleanEnv): the first command
// starts the server, and every session inherits the server's environment.
// Start creates a session and returns its pane pid from the same call, so
// a caller can watch the process end without asking tmux again.
package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// EnvSocket names the private tmux socket used by the whole installation.
const EnvSocket = "KINGDOM_TMUX_SOCKET"

// Session is one tmux session.
type Session struct {
	Name    string
	Created time.Time
	PID     int // pid of the first pane's process
}

// Client runs tmux.
type Client struct {
	Bin string // tmux binary (default "tmux")
	// Socket is a socket name (tmux -L, under $TMUX_TMPDIR/tmux-<uid>/) or,
	// when it contains a slash, the socket's path (tmux -S): a path reaches
	// a server owned by another user, e.g. from a root shell ("" = default
	// server).
	Socket string
	// Timeout bounds each tmux call (default 10 s).
	Timeout time.Duration
}

// New returns a client for the socket named by KINGDOM_TMUX_SOCKET.
func New() *Client { return &Client{Bin: "tmux", Socket: os.Getenv(EnvSocket)} }

// ErrNoSession is returned when a targeted session does not exist.
var ErrNoSession = errors.New("no such session")

// ErrUnreachable: a server may run on the socket but this process cannot
// reach it (a directory or socket it may not open, a server that refuses
// its user). It never means "no session": the error names the path.
var ErrUnreachable = errors.New("unreachable")

func (c *Client) args(a ...string) []string {
	if strings.Contains(c.Socket, "/") {
		return append([]string{"-S", c.Socket}, a...)
	}
	if c.Socket != "" {
		return append([]string{"-L", c.Socket}, a...)
	}
	return a
}

func (c *Client) timeout() time.Duration {
	if c.Timeout == 0 {
		return 10 * time.Second
	}
	return c.Timeout
}

// failed is the error of a tmux command that failed with message msg.
func (c *Client) failed(cmd string, err error, msg string) error {
	if isNoServer(msg) || strings.Contains(msg, "can't find session") || strings.Contains(msg, "session not found") {
		return fmt.Errorf("tmux %s: %w (%s)", cmd, ErrNoSession, msg)
	}
	if isUnreachable(msg) {
		return fmt.Errorf("tmux socket %s %w: %s", c.Path(), ErrUnreachable, msg)
	}
	return fmt.Errorf("tmux %s: %w: %s", cmd, err, msg)
}

// Path is the socket's path: Socket when it is one, else where tmux puts
// a named socket of this process's user (<$TMUX_TMPDIR, default
// /tmp>/tmux-<uid>/<name, default "default">).
func (c *Client) Path() string { return SocketPath(c.Socket, os.Getenv("TMUX_TMPDIR"), os.Getuid()) }

// SocketPath is where tmux puts the socket of a server that user uid
// starts with `tmux -L socket`: <tmpdir, default /tmp>/tmux-<uid>/<socket,
// default "default">, the directory's symlinks resolved as tmux does. A
// socket that is already a path is returned as is.
func SocketPath(socket, tmpdir string, uid int) string {
	if strings.Contains(socket, "/") {
		return socket
	}
	if socket == "" {
		socket = "default"
	}
	if tmpdir == "" {
		tmpdir = "/tmp"
	}
	if real, err := filepath.EvalSymlinks(tmpdir); err == nil {
		tmpdir = real
	}
	return filepath.Join(tmpdir, fmt.Sprintf("tmux-%d", uid), socket)
}

// run runs one tmux command as a tmux process of its own.
func (c *Client) run(ctx context.Context, a ...string) ([]byte, error) {
	bin := c.Bin
	if bin == "" {
		bin = "tmux"
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, c.args(a...)...)
	// The first tmux call starts the server, which keeps this environment
	// as its global one and hands it to every session: no secret may be in
	// it (SPEC §10.14; roles read kingdom.env themselves).
	cmd.Env = redact.CleanEnv(os.Environ())
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return out.Bytes(), fmt.Errorf("tmux %s: %w", a[0], ctx.Err())
		}
		return out.Bytes(), c.failed(a[0], err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// isNoServer: tmux found no server on the socket (no socket file, or a
// stale one nobody listens on). Any other failure to connect
// (isUnreachable) says nothing about the sessions.
func isNoServer(msg string) bool {
	return strings.Contains(msg, "no server running") || strings.Contains(msg, "No such file or directory") ||
		strings.Contains(msg, "error connecting to") && strings.Contains(msg, "Connection refused")
}

func isUnreachable(msg string) bool {
	return strings.Contains(msg, "error connecting to") || strings.Contains(msg, "unsafe permissions") ||
		strings.Contains(msg, "access not allowed")
}

func exact(name string) string { return "=" + name }

// Has reports whether session name exists. Only tmux's own answer ("can't
// find session", no server on the socket) means no; a timeout or any other
// failure is an error, never a "gone" — callers kill and replace soldiers
// they believe dead.
func (c *Client) Has(ctx context.Context, name string) (bool, error) {
	_, err := c.run(ctx, "has-session", "-t", exact(name))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNoSession) && ctx.Err() == nil {
		return false, nil
	}
	return false, err
}

// NewOptions configures a new session.
type NewOptions struct {
	Dir string            // working directory
	Env map[string]string // variables set in the session (tmux -e)
}

// NewSession creates a detached session running argv (executed directly by
// tmux, no shell: tmux execs a multi-word command as given).
func (c *Client) NewSession(ctx context.Context, name string, opt NewOptions, argv ...string) error {
	_, err := c.Start(ctx, name, opt, argv...)
	return err
}

// Start is NewSession that also returns the pid of the session's process
// (printed by the same tmux call), so a caller can see it end without
// asking tmux again.
func (c *Client) Start(ctx context.Context, name string, opt NewOptions, argv ...string) (int, error) {
	if name == "" || strings.ContainsAny(name, ":.=") {
		return 0, fmt.Errorf("tmux new-session: bad session name %q", name)
	}
	if len(argv) == 0 {
		return 0, errors.New("tmux new-session: empty command")
	}
	a := []string{"new-session", "-d", "-P", "-F", "#{pane_pid}", "-s", name, "-x", "200", "-y", "50"}
	if opt.Dir != "" {
		// tmux expands formats in -c (#{…}, #(command)!): ## is a literal #.
		a = append(a, "-c", strings.ReplaceAll(opt.Dir, "#", "##"))
	}
	keys := make([]string, 0, len(opt.Env))
	for k := range opt.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "-e", k+"="+opt.Env[k])
	}
	if len(argv) < 2 {
		// tmux hands a single word to the shell; only two or more words are
		// exec'd directly. Callers always pass flags, so refuse rather than
		// risk a shell.
		return 0, fmt.Errorf("tmux new-session %s: command needs at least two argv words", name)
	}
	a = append(a, "--")
	a = append(a, argv...)
	out, err := c.run(ctx, a...)
	// A new-session that reaches a server while it exits (its last session
	// just ended) fails with "server exited unexpectedly" and creates
	// nothing; the next call starts a new server. Retried twice, and only
	// while the session is really absent.
	for try := 0; try < 2 && err != nil && strings.Contains(err.Error(), "server exited unexpectedly") && ctx.Err() == nil; try++ {
		if ok, herr := c.Has(ctx, name); herr != nil || ok {
			break
		}
		out, err = c.run(ctx, a...)
	}
	if err != nil {
		return 0, err
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out))) // 0 if tmux printed nothing
	return pid, nil
}

// Kill kills session name; a missing session is not an error. Killing the
// server's last session ends the server, and the tmux client can then report
// "server exited unexpectedly" for a kill that worked: a failure is checked
// against Has before it is returned.
func (c *Client) Kill(ctx context.Context, name string) error {
	_, err := c.run(ctx, "kill-session", "-t", exact(name))
	if err == nil || errors.Is(err, ErrNoSession) {
		return nil
	}
	if ok, herr := c.Has(ctx, name); herr == nil && !ok {
		return nil
	}
	return err
}

// listFormat puts the session's name last, after two numbers and a space
// each: tmux replaces a tab (any control character) in -F output with "_"
// when its client's locale is not UTF-8 (LANG unset, a service user's
// shell), and a name may hold spaces.
const listFormat = "#{session_created} #{pane_pid} #{session_name}"

// List returns every session (empty when no server runs). One tmux process.
func (c *Client) List(ctx context.Context) ([]Session, error) {
	out, err := c.run(ctx, "list-sessions", "-F", listFormat)
	if err != nil {
		if errors.Is(err, ErrNoSession) {
			return nil, nil
		}
		return nil, err
	}
	var ss []Session
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			return nil, fmt.Errorf("tmux list-sessions: unexpected line %q", line)
		}
		s := Session{Name: f[2]}
		if sec, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			s.Created = time.Unix(sec, 0)
		}
		s.PID, _ = strconv.Atoi(f[1])
		ss = append(ss, s)
	}
	return ss, nil
}

// PanePID returns the pid of the session's first pane process.
func (c *Client) PanePID(ctx context.Context, name string) (int, error) {
	out, err := c.run(ctx, "display-message", "-p", "-t", exact(name)+":", "#{pane_pid}")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// KillServer stops the tmux server of the socket (tests and demo-stop) and
// removes the socket file: tmux 3.x leaves it behind, and every test and
// demo run would otherwise leave one more dead file in /tmp/tmux-<uid>/.
func (c *Client) KillServer(ctx context.Context) error {
	_, err := c.run(ctx, "kill-server")
	if err != nil && errors.Is(err, ErrNoSession) {
		err = nil
	}
	if err == nil {
		c.removeDeadSocket()
	}
	return err
}

// removeDeadSocket removes the -L socket's file when no server listens on
// it (a new server that raced in keeps its socket). The path is tmux's:
// $TMUX_TMPDIR (else /tmp), tmux-<uid>, the socket name.
func (c *Client) removeDeadSocket() {
	if c.Socket == "" || strings.ContainsRune(c.Socket, '/') {
		return
	}
	dir := os.Getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	path := filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), c.Socket)
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return
	}
	// kill-server returns before the server has closed its listener: give
	// it a moment, then leave a socket that still answers alone.
	for range 20 {
		conn, err := net.Dial("unix", path)
		if err != nil {
			os.Remove(path)
			return
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
}
