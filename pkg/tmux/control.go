package tmux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// A control client is one long-lived `tmux -C attach-session` process to
// which commands are written as command lines; each reply is the
// %begin/%end (or %error) block tmux prints for it, in the order the
// commands were sent. It spares the fork+exec of a tmux client per command
// (its dynamic loading, connecting and identifying to the server): the
// general starts every soldier through it (issues #15/#17).
//
// A control client must be attached to a session. The one a general uses is
// attached to the general's own role session (the pane named by TMUX_PANE),
// so it adds no session: it is used only when this process runs in a pane
// of the very server the Client talks to (TMUX names the same socket).
// Elsewhere (tests, --once, an operator's shell) every command stays a
// tmux process of its own, exactly as without it.
//
// Failure never loses or hangs a call: a command that cannot be sent (the
// client is down and reconnecting failed, a word holds a newline) runs as
// its own tmux process; a command whose reply is lost because the control
// client died runs again as its own process (a new-session that then meets
// "duplicate session" reports the pane of the session the lost command
// created); a reply that does not come within the call's bound kills the
// control client, whose next use reconnects.

// ctlRetry is how long after a failed connect the next command tries again
// (commands meanwhile run as processes of their own).
const ctlRetry = 5 * time.Second

// ctlFlags are the attach flags: no %output of the attached session's panes
// (the general's own log), and no say in the window size, so an operator
// attaching to the role session sees a window sized for their terminal.
const ctlFlags = "no-output,ignore-size"

var errLost = errors.New("tmux control client ended before replying")

type control struct {
	c      *Client
	target string // attach target: a pane id (%N) of the process's own pane
	flags  string // attach -f flags
	retry  time.Duration

	mu      sync.Mutex
	conn    *ctlConn
	nextTry time.Time
	closed  bool
}

// UseControl makes c send its commands through one long-lived control-mode
// client when this process runs in a tmux pane of c's own server (the
// environment's TMUX names c's socket and TMUX_PANE a pane). It reports
// whether it did; otherwise c keeps running a tmux process per command.
// The client connects on first use; Close ends it. Call it before c is
// shared with other goroutines (at start-up).
func (c *Client) UseControl() bool {
	pane := os.Getenv("TMUX_PANE")
	if c.ctl != nil || pane == "" || !strings.HasPrefix(pane, "%") || !c.isOwnServer(os.Getenv("TMUX")) {
		return false
	}
	c.useControl(pane, ctlFlags)
	return true
}

func (c *Client) useControl(target, flags string) {
	c.ctl = &control{c: c, target: target, flags: flags, retry: ctlRetry}
}

// Close ends the control client, if any (the general's shutdown). The
// Client keeps working, one tmux process per command.
func (c *Client) Close() error {
	if c.ctl == nil {
		return nil
	}
	c.ctl.close()
	return nil
}

// isOwnServer reports whether the TMUX value (socket path,server pid,session
// index) names the server socket c talks to.
func (c *Client) isOwnServer(tmuxEnv string) bool {
	path, _, ok := strings.Cut(tmuxEnv, ",")
	if !ok || path == "" {
		return false
	}
	label := c.Socket
	if label == "" {
		label = "default"
	}
	dir := os.Getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	own := filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), label)
	a, err1 := os.Stat(path)
	b, err2 := os.Stat(own)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// ctlOutcome says what became of a command offered to the control client.
type ctlOutcome int

const (
	ctlUnsent ctlOutcome = iota // not sent: run it as a process
	ctlDone                     // replied (out, err are tmux's answer) or timed out (err)
	ctlLost                     // sent, but the client died before replying
)

// run sends one command (argv words, a[0] the command) and waits for its
// reply within ctx.
func (ct *control) run(ctx context.Context, to time.Duration, a []string) ([]byte, string, ctlOutcome, error) {
	line, ok := commandLine(a)
	if !ok {
		return nil, "", ctlUnsent, nil
	}
	k := ct.get(ctx, to)
	if k == nil {
		return nil, "", ctlUnsent, nil
	}
	r, err := k.send(line, to)
	if r == nil {
		return nil, "", ctlUnsent, nil
	}
	if err != nil {
		// The write failed: the client is killed; r is failed as lost.
		k.kill()
	}
	timer := time.NewTimer(to)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, "", ctlDone, fmt.Errorf("tmux %s: %w", a[0], ctx.Err())
	case <-timer.C:
		// A server that does not answer within the bound: drop this client
		// (reaped by its reader); the next command reconnects.
		k.kill()
		return nil, "", ctlDone, fmt.Errorf("tmux %s: %w", a[0], context.DeadlineExceeded)
	}
	if r.lost {
		return nil, "", ctlLost, nil
	}
	if r.failed {
		return nil, strings.Join(r.body, "\n"), ctlDone, errors.New("tmux reported an error")
	}
	var out []byte
	for _, l := range r.body {
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out, "", ctlDone, nil
}

// get returns the live connection, connecting if there is none (at most
// once per retry period after a failure); nil: run commands as processes.
func (ct *control) get(ctx context.Context, to time.Duration) *ctlConn {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.closed || ctx.Err() != nil {
		return nil
	}
	if ct.conn != nil {
		select {
		case <-ct.conn.dead:
			ct.conn = nil
		default:
			return ct.conn
		}
	}
	if time.Now().Before(ct.nextTry) {
		return nil
	}
	k, err := ct.connect(ctx, to)
	if err != nil {
		if ctx.Err() == nil {
			ct.nextTry = time.Now().Add(ct.retry)
		}
		return nil
	}
	ct.conn = k
	return k
}

func (ct *control) close() {
	ct.mu.Lock()
	ct.closed = true
	k := ct.conn
	ct.conn = nil
	ct.mu.Unlock()
	if k == nil {
		return
	}
	_ = k.w.Close() // EOF on its stdin: the client detaches and exits
	select {
	case <-k.dead:
	case <-time.After(2 * time.Second):
		k.kill()
		<-k.dead
	}
}

// ctlConn is one running control client.
type ctlConn struct {
	cmd *exec.Cmd
	w   *os.File // its stdin

	wmu sync.Mutex // one command line at a time, in queue order

	mu     sync.Mutex
	queue  []*ctlReply // sent, awaiting their blocks, oldest first
	ended  bool
	ready  chan string   // the attach's own reply: "" ok, else the error
	waited chan struct{} // closed once the process is reaped
	dead   chan struct{} // closed once it is reaped and its queue failed
}

type ctlReply struct {
	done   chan struct{}
	body   []string
	failed bool // %error
	lost   bool // the client ended first
}

func (ct *control) connect(ctx context.Context, to time.Duration) (*ctlConn, error) {
	bin := ct.c.Bin
	if bin == "" {
		bin = "tmux"
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	k := &ctlConn{w: pw, ready: make(chan string, 1), waited: make(chan struct{}), dead: make(chan struct{})}
	// -N: attach-session would start a server when there is none; that
	// one, empty, exits at once, and a tmux process started meanwhile by a
	// fallback meets "server exited unexpectedly".
	cmd := exec.Command(bin, append([]string{"-N"}, ct.c.args("-C", "attach-session", "-f", ct.flags, "-t", ct.target)...)...)
	// As for every tmux process: no secret in its environment (its
	// update-environment variables reach new sessions).
	cmd.Env = redact.CleanEnv(os.Environ())
	// tmux hands a control client's stdin and stdout to the server, which
	// reads and writes them itself: the process may end (killed) while the
	// server still holds the pipes, so its end is seen by Wait, not by EOF.
	// An attach that fails says why in an %error block; stderr is unused.
	cmd.Stdin = pr
	// Its own process group: a ^C in the general's pane must not take the
	// control client down before the general's shutdown has used it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pr.Close()
	k.cmd = cmd
	go func() {
		// Reaped whatever its pipes do: never a zombie. Wait also closes
		// our end of stdout, which ends the reader.
		_ = cmd.Wait()
		close(k.waited)
	}()
	go k.read(out)
	timer := time.NewTimer(to)
	defer timer.Stop()
	select {
	case msg := <-k.ready:
		if msg == "" {
			return k, nil
		}
		err = errors.New(msg)
	case <-timer.C:
		err = errors.New("no reply to attach")
	case <-ctx.Done():
		err = ctx.Err()
	}
	k.kill()
	<-k.dead
	return nil, fmt.Errorf("tmux control client: %w", err)
}

// send queues a reply slot and writes the command line; nil when the client
// has ended (nothing was sent).
func (k *ctlConn) send(line string, to time.Duration) (*ctlReply, error) {
	r := &ctlReply{done: make(chan struct{})}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	if k.ended {
		k.mu.Unlock()
		return nil, nil
	}
	k.queue = append(k.queue, r)
	k.mu.Unlock()
	_ = k.w.SetWriteDeadline(time.Now().Add(to))
	_, err := io.WriteString(k.w, line)
	return r, err
}

func (k *ctlConn) kill() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Kill()
	}
}

// read parses the client's output until it ends: the first block is the
// attach's own; then each block flagged as this client's answers the
// oldest queued command.
func (k *ctlConn) read(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	attached := false
	var p blockParser
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		b, done := p.line(strings.TrimSuffix(line, "\n"))
		if !done {
			continue
		}
		switch {
		case !attached:
			attached = true
			if b.failed {
				k.ready <- strings.Join(b.body, "; ")
			} else {
				k.ready <- ""
			}
		case b.ours:
			k.deliver(b.body, b.failed)
		}
	}
	// Its stdout ended (or was closed by Wait): this client is done.
	k.kill()
	<-k.waited
	k.mu.Lock()
	k.ended = true
	q := k.queue
	k.queue = nil
	k.mu.Unlock()
	for _, r := range q {
		r.lost = true
		close(r.done)
	}
	if !attached {
		k.ready <- "exited before attaching"
	}
	_ = k.w.Close()
	close(k.dead)
}

func (k *ctlConn) deliver(body []string, failed bool) {
	k.mu.Lock()
	if len(k.queue) == 0 {
		k.mu.Unlock()
		return // a block of ours nobody asked for (cannot happen; ignore)
	}
	r := k.queue[0]
	k.queue = k.queue[1:]
	k.mu.Unlock()
	r.body, r.failed = body, failed
	close(r.done)
}

// blockParser splits a control client's output into command blocks.
// Notifications between blocks (%session-changed, %sessions-changed,
// %window-add, %output …) are skipped. A block ends only at the %end/%error
// line carrying its own command number, so output lines that merely look
// like one do not cut it short. Released tmux writes notifications only
// between blocks; a line inside a block that has the shape of one
// ("%word" alone or followed by a space) is dropped too — none of the
// commands this package sends prints such a line (pids, session lines with
// tabs, error messages), and some tmux development builds (next-3.8) wrote
// notifications inside the running command's block.
type blockParser struct {
	in  bool
	b   ctlBlock
	num string
}

type ctlBlock struct {
	ours   bool // flags bit 1: the reply to a command this client sent
	failed bool // %error
	body   []string
}

// line takes one output line; done reports a completed block.
func (p *blockParser) line(l string) (ctlBlock, bool) {
	if !p.in {
		if strings.HasPrefix(l, "%begin ") {
			f := strings.Fields(l)
			flags := 0
			if len(f) >= 4 {
				flags, _ = strconv.Atoi(f[3])
			}
			p.in, p.num, p.b = true, blockNum(l), ctlBlock{ours: flags&1 != 0}
		}
		return ctlBlock{}, false
	}
	end, failed := strings.HasPrefix(l, "%end "), strings.HasPrefix(l, "%error ")
	if (end || failed) && blockNum(l) == p.num {
		p.in = false
		b := p.b
		b.failed = failed
		return b, true
	}
	if !isNotification(l) {
		p.b.body = append(p.b.body, l)
	}
	return ctlBlock{}, false
}

// isNotification reports whether l has the shape of a control-mode
// notification: "%" and a lower-case word, alone or before a space.
func isNotification(l string) bool {
	if len(l) < 2 || l[0] != '%' {
		return false
	}
	for i := 1; i < len(l); i++ {
		switch c := l[i]; {
		case c == ' ':
			return i > 1
		case c >= 'a' && c <= 'z', c == '-' && i > 1:
		default:
			return false
		}
	}
	return true
}

// blockNum is the command number of a %begin/%end/%error line
// ("%end <time> <number> <flags>").
func blockNum(line string) string {
	f := strings.Fields(line)
	if len(f) < 3 {
		return ""
	}
	return f[2]
}

// commandLine renders argv words as one line for tmux's command parser,
// each word single-quoted: inside single quotes tmux expands nothing ($, ~,
// \, #, ;, {, } are plain characters); a ' is closed, escaped and reopened
// ('\”). A word with a newline (it would end the line) or a NUL cannot be
// sent: false, and the command runs as a process of its own.
func commandLine(a []string) (string, bool) {
	var b strings.Builder
	for i, w := range a {
		if strings.ContainsAny(w, "\n\x00") {
			return "", false
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
	b.WriteByte('\n')
	return b.String(), true
}
