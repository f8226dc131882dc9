package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// lockedBuf is a log sink shared by the server's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// statusFor sends GET path with the given Host header and returns the
// status (the body of an event stream is not read).
func statusFor(t *testing.T, url, path, host string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	req.Host = host
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: treeAuth{tr}}).Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %q): %v", path, host, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A page on a DNS-rebinding name (evil.example resolving to 127.0.0.1)
// sends Host: evil.example; every path answers it 421, while the names of
// this machine and the configured ones are served.
func TestHost_ForeignNamesAreMisdirectedOnEveryPath(t *testing.T) {
	l := newBase(t)
	s, url := startServer(t, Options{Layout: l, AllowedHosts: []string{"dash.example.org", "192.0.2.9"}})
	_, port, _ := net.SplitHostPort(s.Addr())
	good := []string{
		"127.0.0.1:" + port, "127.0.0.1", "127.9.9.9:" + port, "[::1]:" + port, "[::1]",
		"localhost", "LocalHost:" + port, "localhost.", "dash.example.org", "DASH.example.org:443", "192.0.2.9:" + port,
	}
	bad := []string{
		"evil.example", "evil.example:" + port, "localhost.evil.example:" + port, "127.0.0.1.evil.example",
		"dash.example.org.evil.example", "192.0.2.1:" + port, "[::2]:" + port,
	}
	for _, p := range []string{"/", "/api/v1/state", "/api/v1/events", "/metrics"} {
		for _, h := range good {
			if code := statusFor(t, url, p, h); code != http.StatusOK {
				t.Errorf("%s with Host %q: %d, want 200", p, h, code)
			}
		}
		for _, h := range bad {
			if code := statusFor(t, url, p, h); code != http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %q: %d, want 421", p, h, code)
			}
		}
	}
	// HTTP/1.0 may leave Host out: no name, no answer.
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /api/v1/state HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("request without Host: %d, want 421", resp.StatusCode)
	}
}

// The listen host is a name of the dashboard; a wildcard listen host
// serves every address of the machine, so any address literal is one, but
// names must still be listed.
func TestHost_ListenHostAndWildcard(t *testing.T) {
	named, err := New(withStore(t, Options{Layout: newBase(t), Listen: "dash.internal:8765", Token: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	wild, err := New(withStore(t, Options{Layout: newBase(t), Listen: ":8765", Token: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    *Server
		host string
		ok   bool
	}{
		{named, "dash.internal:8765", true},
		{named, "Dash.Internal", true},
		{named, "192.0.2.7:8765", false},
		{named, "other.internal", false},
		{wild, "192.0.2.7:8765", true},
		{wild, "[2001:db8::1]:8765", true},
		{wild, "evil.example:8765", false},
		{wild, "", false},
	} {
		if got := tc.s.hostAllowed(tc.host); got != tc.ok {
			t.Errorf("listen %s, Host %q: allowed=%v, want %v", tc.s.o.Listen, tc.host, got, tc.ok)
		}
	}
}

// http.listen: unix serves on $BASE_DIR/run/dashboard.sock, mode 0600 in a
// 0700 directory, replacing the socket a dead chamberlain left; a live
// socket and a file that is not a socket are left alone.
func TestUnixSocket_OwnerOnlyAndStaleReplaced(t *testing.T) {
	l := newBase(t)
	path := l.DashboardSocket()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	startServer(t, Options{Layout: l, Listen: "unix"})
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, want 0700", di.Mode().Perm())
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}}
	for host, want := range map[string]int{"localhost": http.StatusOK, "evil.example": http.StatusMisdirectedRequest} {
		resp, err := client.Get("http://" + host + "/api/v1/state")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("over the socket with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if ln, err := listenUnix(path); err == nil || !strings.Contains(err.Error(), "another server answers") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("a second server on the live socket: %v", err)
	}
	other := filepath.Join(t.TempDir(), "run", "dashboard.sock")
	os.MkdirAll(filepath.Dir(other), 0o700)
	os.WriteFile(other, []byte("keep me"), 0o600)
	if _, err := listenUnix(other); err == nil {
		t.Error("a regular file at the socket path was replaced")
	}
	if b, _ := os.ReadFile(other); string(b) != "keep me" {
		t.Errorf("the file in the way changed: %q", b)
	}
}

// http.require_token: the socket asks for the token too (the tree's when
// $http.token_env is unset); an explicit token is asked on loopback.
func TestRequireToken_AlsoOnTheSocket(t *testing.T) {
	l := newBase(t)
	startServer(t, Options{Layout: l, Listen: "unix", RequireToken: true})
	tok, err := readToken(TokenFile(l))
	if err != nil {
		t.Fatalf("require_token without $token_env made no tree token: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", l.DashboardSocket())
		},
		DisableKeepAlives: true,
	}}
	for auth, want := range map[string]int{"": http.StatusUnauthorized, "Bearer wrong": http.StatusUnauthorized, "Bearer " + tok: http.StatusOK} {
		req, _ := http.NewRequest("GET", "http://localhost/api/v1/state", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("socket with Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
	_, url := startServer(t, Options{Layout: newBase(t), RequireToken: true, Token: "tok-9"})
	if code, _ := get(t, url+"/api/v1/state"); code != http.StatusUnauthorized {
		t.Errorf("loopback without the token: %d, want 401", code)
	}
	if code, _ := get(t, url+"/api/v1/state", "Authorization", "Bearer tok-9"); code != http.StatusOK {
		t.Errorf("loopback with the token: %d", code)
	}
}

// The default (a loopback port, no $token_env) is no side door: another
// local account can connect to the port but not read the tree, so the
// dashboard asks for a token kept in the tree (0600), made on first start
// and kept across restarts. Without it every path answers 401 and nothing
// of the kingdom; with it (Bearer, Basic, or ?token= once, which sets an
// HttpOnly SameSite=Strict cookie) the page and its data are served.
func TestAuth_DefaultLoopbackAsksForTheTreeToken(t *testing.T) {
	l := newBase(t)
	q := filesQueue(t, l, layout.QTasks)
	if err := q.Put(layout.Completed, "task-dm", validTask("task-dm", "slack.dm",
		map[string]any{"text": "secret DM text", "channel": "D1"}, "completed")); err != nil {
		t.Fatal(err)
	}
	s, err := New(withStore(t, Options{Layout: l, Listen: "127.0.0.1:0", Tmux: noTmux{}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.Addr()
	fi, err := os.Lstat(TokenFile(l))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v %v, want mode 0600", TokenFile(l), fi, err)
	}
	tok, err := readToken(TokenFile(l))
	if err != nil || len(tok) < 32 {
		t.Fatalf("token %q: %v", tok, err)
	}
	// What another account can do: connect, without the token.
	for _, p := range []string{"/", "/api/v1/state", "/api/v1/events", "/metrics", "/?token=wrong"} {
		for _, auth := range []string{"", "Bearer wrong"} {
			req, _ := http.NewRequest("GET", url+p, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "secret DM") || strings.Contains(string(b), "task-dm") {
				t.Errorf("%s with Authorization %q: %d %q, want 401 and nothing of the kingdom", p, auth, resp.StatusCode, b)
			}
		}
	}
	if code, body := get(t, url+"/api/v1/state", "Authorization", "Bearer "+tok); code != http.StatusOK || !strings.Contains(body, "secret DM text") {
		t.Errorf("state with the tree token: %d %.200s", code, body)
	}

	// A browser: ?token= once sets the cookie and drops the token from
	// the address; the page's own requests then carry only the cookie.
	noFollow := &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(url + "/?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == tokenCookie {
			ck = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || ck == nil ||
		!ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || strings.Contains(ck.Value, tok) {
		t.Fatalf("/?token=: %d Location %q cookie %+v, want 303 to / with an HttpOnly SameSite=Strict cookie not holding the token", resp.StatusCode, resp.Header.Get("Location"), ck)
	}
	for _, p := range []string{"/", "/api/v1/state", "/metrics"} {
		req, _ := http.NewRequest("GET", url+p, nil)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with the cookie: %d", p, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", url+"/api/v1/state", nil)
	req.AddCookie(&http.Cookie{Name: tokenCookie, Value: strings.Repeat("0", 64)})
	if resp, err := noFollow.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %v %v, want 401", resp, err)
	}

	// A restart keeps the token (an open page keeps working).
	again, err := New(withStore(t, Options{Layout: l, Listen: "127.0.0.1:0", Tmux: noTmux{}}))
	if err != nil || again.o.Token != tok {
		t.Fatalf("second start: token changed or %v", err)
	}
	// A token file others could read is refused, never served with.
	os.Chmod(TokenFile(l), 0o644)
	if _, err := New(withStore(t, Options{Layout: l, Listen: "127.0.0.1:0"})); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a 0644 token file: %v, want a refusal", err)
	}
}

// As another local account (nobody), the token file cannot be read: the
// tree's 0700 is what keeps the port closed to it. Needs root to switch.
func TestAuth_TreeTokenUnreadableByAnotherAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as nobody")
	}
	l := newBase(t)
	if _, err := TreeToken(l); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cat", TokenFile(l))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("nobody read the dashboard token: %q", out)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// An idle-connection flood: with the descriptor limit set just above what
// the test's own clients and the cap need, the server keeps at most
// MaxConns connections, closes the rest at once, logs the refusal once
// (rate-limited), and a tick that opens files still gets descriptors.
// Without the cap the server's side of the flood takes the descriptors and
// the dials (or the tick) fail with EMFILE.
func TestConnCap_IdleFloodLeavesDescriptorsForTheTick(t *testing.T) {
	const capN, flood = 4, 40
	l := newBase(t)
	logs := &lockedBuf{}
	s, _ := startServer(t, Options{Layout: l, MaxConns: capN, MaxClients: 2, Log: slog.New(slog.NewTextHandler(logs, nil))})

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(openFDs(t) + flood + capN + 12)
	if lim.Cur > old.Max {
		t.Skipf("hard descriptor limit %d too low for the test", old.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })

	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range flood {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatalf("dial %d of %d: %v", i+1, flood, err)
		}
		conns = append(conns, c)
	}
	served, refused := 0, 0
	var keep []net.Conn
	for _, c := range conns {
		c.SetDeadline(time.Now().Add(20 * time.Second)) // a safety net, not a measurement
		io.WriteString(c, "GET /api/v1/state HTTP/1.1\r\nHost: localhost\r\n"+authLine(s.Addr())+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		var ne net.Error
		switch {
		case err == nil && resp.StatusCode == http.StatusOK:
			resp.Body.Close()
			served++
			keep = append(keep, c) // now an idle keep-alive holding a slot
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("a connection was neither served nor closed: %v", err)
		case err != nil:
			refused++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if served != capN || refused != flood-capN {
		t.Fatalf("served %d and refused %d of %d, want %d and %d", served, refused, flood, capN, flood-capN)
	}

	// The tick: a few files open at once (a heartbeat, a temp, its dir).
	var files []*os.File
	for i := range 4 {
		f, err := os.Create(filepath.Join(l.Base, "tick-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("the tick gets no descriptor: %v", err)
		}
		files = append(files, f)
	}
	for _, f := range files {
		f.Close()
	}
	if n := strings.Count(logs.String(), "http.max_connections reached"); n != 1 {
		t.Errorf("refusals logged %d times, want once (rate-limited):\n%s", n, logs.String())
	}

	// A slot freed is a slot for the next client.
	keep[0].Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, err := tryGet(s.Addr()); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tryGet(addr string) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /api/v1/state HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"+authLine(addr)+"\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A keep-alive connection with no next request is closed after IdleTimeout
// instead of holding its descriptor for good.
func TestIdleTimeout_ClosesAQuietKeepAlive(t *testing.T) {
	s, _ := startServer(t, Options{Layout: newBase(t), IdleTimeout: 50 * time.Millisecond})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a safety net, not a measurement
	io.WriteString(c, "GET /api/v1/state HTTP/1.1\r\nHost: localhost\r\n"+authLine(s.Addr())+"\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive: %v, want the server to close it (EOF)", err)
	}
}

// ReadTimeout bounds reading a request; an event stream lives on past it
// (net/http lifts the read deadline once a body-less request is read, so a
// stream needs only its own write bound).
func TestEvents_StreamOutlivesTheReadTimeout(t *testing.T) {
	l := newBase(t)
	em := emitter(l, "king")
	defer em.Close()
	_, url := startServer(t, Options{Layout: l, ReadTimeout: 50 * time.Millisecond, Poll: 20 * time.Millisecond})
	c := openSSE(t, url+"/api/v1/events", "")
	c.WaitComment(t, "kingdom events from")
	time.Sleep(300 * time.Millisecond) // several read timeouts pass
	em.Emit("task.created", map[string]int{"n": 7})
	ev, err := c.Next()
	if err != nil {
		t.Fatalf("stream ended after the read timeout: %v", err)
	}
	if n := eventN(t, ev.Data); n != 7 {
		t.Fatalf("got n=%d", n)
	}
}

// flakyListener fails Accept with what the test sends.
type flakyListener struct {
	errs  chan error
	calls chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (f *flakyListener) Accept() (net.Conn, error) {
	f.calls <- struct{}{}
	select {
	case err := <-f.errs:
		return nil, err
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *flakyListener) Close() error   { f.once.Do(func() { close(f.done) }); return nil }
func (f *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

type emfile struct{}

func (emfile) Error() string   { return "accept: too many open files" }
func (emfile) Timeout() bool   { return false }
func (emfile) Temporary() bool { return true }

// net/http's own complaints (here: accept failing for want of descriptors)
// reach the role's log, at most one line a minute with the count of the
// lines held back.
func TestServeErrors_ReachTheLogRateLimited(t *testing.T) {
	logs := &lockedBuf{}
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := New(withStore(t, Options{Layout: newBase(t), Listen: "127.0.0.1:0", Clock: clk, Tmux: noTmux{}, Log: slog.New(slog.NewTextHandler(logs, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{errs: make(chan error), calls: make(chan struct{}, 16), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.serve(ctx, fl)
	fail := func() {
		<-fl.calls
		fl.errs <- emfile{}
	}
	fail()
	fail()
	fail()
	<-fl.calls // the third error has been logged (or held back)
	if n := strings.Count(logs.String(), "too many open files"); n != 1 {
		t.Fatalf("%d lines for three accept errors within a minute, want 1:\n%s", n, logs.String())
	}
	clk.Advance(time.Minute)
	fl.errs <- emfile{}
	<-fl.calls
	out := logs.String()
	if n := strings.Count(out, "too many open files"); n != 2 || !strings.Contains(out, "suppressed=2") {
		t.Fatalf("after a minute: want a second line counting the 2 held back:\n%s", out)
	}
}
