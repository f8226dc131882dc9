package tmux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// envDump makes the test binary, started as a session's command, write what
// it received (argv, directory, environment, pid) to the named file and exit.
const envDump = "KINGDOM_TMUX_TEST_DUMP"

type dump struct {
	Args []string
	Dir  string
	Env  map[string]string
	PID  int
}

func TestMain(m *testing.M) {
	if out := os.Getenv(envDump); out != "" {
		d := dump{Args: os.Args[1:], Env: map[string]string{}, PID: os.Getpid()}
		d.Dir, _ = os.Getwd()
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			d.Env[k] = v
		}
		b, _ := json.Marshal(d)
		tmp := out + ".tmp"
		if os.WriteFile(tmp, b, 0o600) == nil {
			os.Rename(tmp, out)
		}
		os.Exit(0)
	}
	if out := os.Getenv(envInPane); out != "" {
		os.Exit(inPane(out))
	}
	os.Exit(m.Run())
}

// envInPane makes the test binary, started as a session's command, act as
// a general would: UseControl, then Starts; it writes what happened.
const envInPane = "KINGDOM_TMUX_TEST_IN_PANE"

func inPane(out string) int {
	c := tmux.New()
	var b strings.Builder
	fmt.Fprintf(&b, "use=%v\n", c.UseControl())
	ctx := context.Background()
	before := tmux.Execs()
	for i := 0; i < 3; i++ {
		pid, err := c.Start(ctx, fmt.Sprintf("pane-s-%d", i), tmux.NewOptions{}, "sleep", "60")
		fmt.Fprintf(&b, "start=%d err=%v\n", pid, err)
	}
	fmt.Fprintf(&b, "execs=%d ctl=%v\n", tmux.Execs()-before, tmux.ControlPID(c) != 0)
	c.Close()
	os.WriteFile(out+".tmp", []byte(b.String()), 0o600)
	os.Rename(out+".tmp", out)
	return 0
}

func readDump(t *testing.T, path string) dump {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			var d dump
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
		time.Sleep(10 * time.Millisecond) // waiting for the session's process
	}
	t.Fatalf("session never wrote %s", path)
	return dump{}
}

// controlled returns a client on a private server whose "keep" session runs
// keepCmd, with its control client attached there (flags as given).
func controlled(t *testing.T, flags string, keepCmd ...string) *tmux.Client {
	t.Helper()
	c := privateClient(t)
	if len(keepCmd) == 0 {
		keepCmd = []string{"sleep", "600"}
	}
	if err := c.NewSession(context.Background(), "keep", tmux.NewOptions{}, keepCmd...); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tmux", "-L", c.Socket, "display-message", "-p", "-t", "=keep:", "#{pane_id}").Output()
	if err != nil {
		t.Fatal(err)
	}
	tmux.UseControlAt(c, strings.TrimSpace(string(out)), flags)
	t.Cleanup(func() { c.Close() })
	return c
}

func selfArgv(args ...string) []string { return append([]string{os.Args[0]}, args...) }

func TestControl_StartCreatesTheSessionWithoutAProcess(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	// The first command connects the control client.
	if ok, err := c.Has(ctx, "keep"); !ok || err != nil {
		t.Fatalf("Has(keep) = %v, %v", ok, err)
	}
	first := tmux.ControlPID(c)
	if first == 0 {
		t.Fatal("no control client after the first command")
	}
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "dump")
	before := tmux.Execs()
	pid, err := c.Start(ctx, "soldier-1", tmux.NewOptions{Dir: dir, Env: map[string]string{envDump: out, "KINGDOM_X": "x y"}}, selfArgv("one", "two")...)
	if err != nil {
		t.Fatal(err)
	}
	if n := tmux.Execs() - before; n != 0 {
		t.Fatalf("Start ran %d tmux processes; want it sent through the control client", n)
	}
	d := readDump(t, out)
	if pid != d.PID {
		t.Errorf("Start returned pid %d; the session's process is %d", pid, d.PID)
	}
	if strings.Join(d.Args, "|") != "one|two" || d.Dir != dir || d.Env["KINGDOM_X"] != "x y" {
		t.Errorf("session got args %q dir %q KINGDOM_X %q", d.Args, d.Dir, d.Env["KINGDOM_X"])
	}
	if d.Env["PATH"] != os.Getenv("PATH") {
		t.Errorf("session PATH = %q, want the caller's %q (as a tmux process would pass it)", d.Env["PATH"], os.Getenv("PATH"))
	}
	// Errors keep their meaning: a missing session is ErrNoSession.
	if ok, err := c.Has(ctx, "nosuch"); ok || err != nil {
		t.Fatalf("Has(nosuch) = %v, %v; want false, nil", ok, err)
	}
	if err := c.Kill(ctx, "nosuch"); err != nil {
		t.Fatalf("Kill(nosuch) = %v", err)
	}
	if _, err := c.Start(ctx, "keep", tmux.NewOptions{}, "sleep", "1"); err == nil || !strings.Contains(err.Error(), "duplicate session") {
		t.Fatalf("Start of an existing name = %v; want tmux's duplicate session error", err)
	}
	ss, err := c.List(ctx)
	if err != nil || len(ss) < 1 {
		t.Fatalf("List = %v, %v", ss, err)
	}
	if n := tmux.Execs() - before; n != 0 {
		t.Fatalf("%d tmux processes ran; want every command through the control client", n)
	}
	if tmux.ControlPID(c) != first {
		t.Fatal("the control client was replaced without a failure")
	}
	// Closing ends and reaps it; the client still works, one process a call.
	c.Close()
	if tmux.ControlPID(c) != 0 || alive(first) {
		t.Fatalf("control client %d still there after Close", first)
	}
	if ok, err := c.Has(ctx, "keep"); !ok || err != nil {
		t.Fatalf("Has after Close = %v, %v", ok, err)
	}
}

func serverPID(t *testing.T, c *tmux.Client) int {
	t.Helper()
	out, err := exec.Command("tmux", "-L", c.Socket, "display-message", "-p", "#{pid}").Output()
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(out), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid exists (a zombie counts: it was not reaped).
func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Every word is data: nothing in it may be read by tmux's command parser
// as syntax (quotes, escapes, variables, ~, ;, #, braces, %-directives)
// nor by tmux's format expansion (the directory).
func TestControl_HostileWordsArriveIntact(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	hostile := []string{
		`'`, `"`, `\`, `\\`, `a\`, `\'`, `'\''`, `;`, `a;b`, `\;`, `#`, `# comment`, `#{pane_pid}`, `##`, `#(touch /tmp/x)`,
		`$HOME`, `${HOME}`, `$`, `{`, `}`, `{ a }`, `~`, `~root`, `%end 1 2 1`, `%if`, `%begin`, ``, ` `, `a b`, "tab\there",
		"cr\rhere", `x=y`, `-d`, `--`, `é ü 漢`, `\u0041`, `\101`, `"$(id)"`,
	}
	dir := filepath.Join(t.TempDir(), `d'ir "#{x}" ## $HOME; ~ \ {}`)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i, h := range hostile {
		env[fmt.Sprintf("KINGDOM_H%d", i)] = h
	}
	out := filepath.Join(t.TempDir(), "dump")
	env[envDump] = out
	before := tmux.Execs()
	pid, err := c.Start(ctx, "soldier-h", tmux.NewOptions{Dir: dir, Env: env}, selfArgv(hostile...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n := tmux.Execs() - before; n != 0 {
		t.Fatalf("hostile Start ran %d tmux processes; want the control client", n)
	}
	d := readDump(t, out)
	if d.PID != pid {
		t.Errorf("pid %d, want %d", pid, d.PID)
	}
	if len(d.Args) != len(hostile) {
		t.Fatalf("argv arrived as %d words %q; want %d %q", len(d.Args), d.Args, len(hostile), hostile)
	}
	for i, h := range hostile {
		if d.Args[i] != h {
			t.Errorf("argv word %d arrived as %q, want %q", i, d.Args[i], h)
		}
		if v := d.Env[fmt.Sprintf("KINGDOM_H%d", i)]; v != h {
			t.Errorf("env value %d arrived as %q, want %q", i, v, h)
		}
	}
	if d.Dir != dir {
		t.Errorf("dir arrived as %q, want %q", d.Dir, dir)
	}

	// A newline cannot travel on a command line: that call runs as a tmux
	// process of its own, and its words arrive intact too.
	out2 := filepath.Join(t.TempDir(), "dump")
	nl := []string{"line1\nline2", "\n"}
	before = tmux.Execs()
	pid, err = c.Start(ctx, "soldier-nl", tmux.NewOptions{Env: map[string]string{envDump: out2, "KINGDOM_NL": "a\nb"}}, selfArgv(nl...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n := tmux.Execs() - before; n != 1 {
		t.Errorf("a newline in a word ran %d tmux processes; want 1", n)
	}
	d = readDump(t, out2)
	if d.PID != pid || strings.Join(d.Args, "|") != strings.Join(nl, "|") || d.Env["KINGDOM_NL"] != "a\nb" {
		t.Errorf("newline words arrived as %q env %q pid %d (want %d)", d.Args, d.Env["KINGDOM_NL"], d.PID, pid)
	}
}

func TestControl_ConcurrentStartsGetTheirOwnReplies(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	const n = 12
	pids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Each command's own reply differs (its pane pid or an error).
			if i%4 == 3 {
				_, errs[i] = c.Has(ctx, fmt.Sprintf("nosuch-%d", i))
				return
			}
			pids[i], errs[i] = c.Start(ctx, fmt.Sprintf("s-%d", i), tmux.NewOptions{}, "sleep", "60")
		}(i)
	}
	wg.Wait()
	ss, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for _, s := range ss {
		byName[s.Name] = s.PID
	}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Errorf("call %d: %v", i, errs[i])
			continue
		}
		if i%4 == 3 {
			continue
		}
		name := fmt.Sprintf("s-%d", i)
		if pids[i] == 0 || pids[i] != byName[name] {
			t.Errorf("Start(%s) returned pid %d; the session's pane pid is %d", name, pids[i], byName[name])
		}
	}
}

// Without no-output, the attached pane's output streams in as %output
// notifications between (and while tmux prepares) the replies; lines that
// look like block ends must not confuse the parser.
func TestControl_OutputNoiseIsSkipped(t *testing.T) {
	ctx := context.Background()
	noisy := `while :; do i=0; while [ $i -lt 20 ]; do echo "%end 1 1 1"; echo "%begin 1 1 1"; i=$((i+1)); done; sleep 0.02; done`
	c := controlled(t, "ignore-size", "/bin/sh", "-c", noisy)
	before := tmux.Execs()
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("n-%d", i)
		pid, err := c.Start(ctx, name, tmux.NewOptions{}, "sleep", "60")
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.PanePID(ctx, name)
		if err != nil || got != pid {
			t.Fatalf("%s: Start pid %d, PanePID %d, %v", name, pid, got, err)
		}
		// A pause lets the pane's output arrive between commands.
		time.Sleep(30 * time.Millisecond)
	}
	if n := tmux.Execs() - before; n != 0 {
		t.Fatalf("%d tmux processes ran; want the control client", n)
	}
}

func TestControl_KilledControlClientIsReplaced(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	if _, err := c.Start(ctx, "a", tmux.NewOptions{}, "sleep", "60"); err != nil {
		t.Fatal(err)
	}
	old := tmux.ControlPID(c)
	if old == 0 {
		t.Fatal("no control client")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The next Starts succeed whatever they meet (a dead pipe, a lost
	// reply, a reaped client) and a new control client takes over.
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("b-%d", i)
		pid, err := c.Start(ctx, name, tmux.NewOptions{}, "sleep", "60")
		if err != nil {
			t.Fatalf("Start after the control client died: %v", err)
		}
		if got, err := c.PanePID(ctx, name); err != nil || got != pid {
			t.Fatalf("%s: Start pid %d, PanePID %d, %v", name, pid, got, err)
		}
	}
	now := tmux.ControlPID(c)
	if now == 0 || now == old {
		t.Fatalf("control client %d after the old one (%d) was killed; want a new one", now, old)
	}
	if alive(old) {
		t.Fatalf("killed control client %d was not reaped", old)
	}
}

func TestControl_KilledServerFallsBack(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	if _, err := c.Start(ctx, "a", tmux.NewOptions{}, "sleep", "60"); err != nil {
		t.Fatal(err)
	}
	old := tmux.ControlPID(c)
	server := serverPID(t, c)
	if err := exec.Command("tmux", "-L", c.Socket, "kill-server").Run(); err != nil {
		t.Fatal(err)
	}
	// A tmux started while the old server is still exiting meets "server
	// exited unexpectedly" (control client or not): let it finish.
	deadline := time.Now().Add(5 * time.Second)
	for alive(server) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// The control client's session is gone with the server: commands run
	// as processes of their own (the first starts a new server).
	pid, err := c.Start(ctx, "b", tmux.NewOptions{}, "sleep", "60")
	if err != nil {
		t.Fatalf("Start after the server died: %v", err)
	}
	if got, err := c.PanePID(ctx, "b"); err != nil || got != pid {
		t.Fatalf("Start pid %d, PanePID %d, %v", pid, got, err)
	}
	if ok, err := c.Has(ctx, "a"); ok || err != nil {
		t.Fatalf("Has(a) on the new server = %v, %v", ok, err)
	}
	if alive(old) {
		t.Fatalf("control client %d of the dead server was not reaped", old)
	}
}

// A server that stops answering costs a call its bound, not a hang; the
// control client is dropped (and reaped), and once the server answers again
// a new one takes over.
func TestControl_StalledServerNeverHangs(t *testing.T) {
	ctx := context.Background()
	c := controlled(t, "no-output,ignore-size")
	c.Timeout = 500 * time.Millisecond
	// A reconnect tried while the server is stopped fails; the next try
	// then waits this long.
	tmux.SetControlRetry(c, 100*time.Millisecond)
	if ok, err := c.Has(ctx, "keep"); !ok || err != nil {
		t.Fatalf("Has(keep) = %v, %v", ok, err)
	}
	old := tmux.ControlPID(c)
	server := serverPID(t, c)
	if err := syscall.Kill(server, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			syscall.Kill(server, syscall.SIGCONT)
		}
	}()
	if _, err := c.Start(ctx, "stuck", tmux.NewOptions{}, "sleep", "60"); err == nil {
		t.Fatal("Start on a stopped server succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Has(cctx, "keep"); err == nil {
		t.Fatal("Has with a cancelled context succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(old) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the dropped client is reaped asynchronously
	}
	if alive(old) {
		t.Fatalf("dropped control client %d was not reaped", old)
	}
	syscall.Kill(server, syscall.SIGCONT)
	resumed = true
	time.Sleep(150 * time.Millisecond) // past the retry period of a reconnect that failed while stopped
	var pid int
	var err error
	for i := 0; i < 3; i++ {
		// The first calls may still meet the dropped client's leftovers
		// (a timed-out reply); one must succeed.
		if pid, err = c.Start(ctx, fmt.Sprintf("next-%d", i), tmux.NewOptions{}, "sleep", "60"); err == nil {
			if got, _ := c.PanePID(ctx, fmt.Sprintf("next-%d", i)); got != pid {
				t.Fatalf("Start pid %d, PanePID %d", pid, got)
			}
			break
		}
	}
	if err != nil {
		t.Fatalf("Start after the server resumed: %v", err)
	}
	if now := tmux.ControlPID(c); now == 0 || now == old {
		t.Fatalf("control client now %d (old %d); want a new one", now, old)
	}
}

func TestControl_OnlyInsideAPaneOfTheSameServer(t *testing.T) {
	c := privateClient(t)
	if err := c.NewSession(context.Background(), "keep", tmux.NewOptions{}, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tmux", "-L", c.Socket, "display-message", "-p", "-t", "=keep:", "#{socket_path},#{pid},0").Output()
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimSpace(string(out))
	if !tmux.IsOwnServer(c, own) {
		t.Errorf("TMUX=%q not recognised as the client's server", own)
	}
	other := &tmux.Client{Socket: c.Socket + "-other"}
	if tmux.IsOwnServer(other, own) {
		t.Error("another socket's TMUX accepted")
	}
	if tmux.IsOwnServer(c, "") || tmux.IsOwnServer(c, "/nonexistent,1,0") {
		t.Error("empty or missing TMUX accepted")
	}
	t.Setenv("TMUX", "")
	t.Setenv("TMUX_PANE", "")
	if c.UseControl() {
		t.Error("UseControl outside tmux enabled a control client")
	}
	t.Setenv("TMUX", own)
	t.Setenv("TMUX_PANE", "%0")
	if !c.UseControl() {
		t.Error("UseControl inside a pane of the same server refused")
	}
	c.Close()
}

// A process in a pane of the server (as start runs a general) turns the
// control client on by itself and starts sessions without tmux processes.
func TestControl_UseControlInsideARolePane(t *testing.T) {
	c := privateClient(t)
	out := filepath.Join(t.TempDir(), "report")
	env := map[string]string{envInPane: out, tmux.EnvSocket: c.Socket}
	if err := c.NewSession(context.Background(), "gen-x", tmux.NewOptions{Env: env}, os.Args[0], "-test.run=^$"); err != nil {
		t.Fatal(err)
	}
	var b []byte
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if b, err = os.ReadFile(out); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // waiting for the pane's process
	}
	got := string(b)
	if !strings.HasPrefix(got, "use=true\n") || !strings.Contains(got, "execs=0 ctl=true") || strings.Contains(got, "err=tmux") || strings.Contains(got, "start=0 ") {
		t.Fatalf("inside a pane: %q; want the control client used for every Start", got)
	}
}
