package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// Addr is the bound address once Start returned ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// newBase returns a fresh runtime tree.
func newBase(t testing.TB) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	return l
}

// noTmux answers like a tmux server with no sessions.
type noTmux struct{}

func (noTmux) List(context.Context) ([]tmux.Session, error) { return nil, nil }

// treeTokens maps the address of a server startServer started with the
// tree's own token to that token: the package's plain requests (http.Get,
// get, openSSE) carry it, as a browser carries the cookie, so the tests of
// what the dashboard serves need not each send it. Requests that set their
// own Authorization, and servers given an explicit Token, are left alone.
var treeTokens sync.Map

type treeAuth struct{ next http.RoundTripper }

func (a treeAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok, ok := treeTokens.Load(r.URL.Host); ok && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	return a.next.RoundTrip(r)
}

func init() { http.DefaultTransport = treeAuth{http.DefaultTransport} }

// trustTree lets the package's plain requests to addr carry l's tree token.
func trustTree(t testing.TB, l layout.Layout, addr string) string {
	t.Helper()
	tok, err := readToken(TokenFile(l))
	if err != nil {
		t.Fatalf("the tree's dashboard token: %v", err)
	}
	treeTokens.Store(addr, tok)
	t.Cleanup(func() { treeTokens.Delete(addr) })
	return tok
}

// authLine is the Authorization header line for hand-written requests to
// addr ("" when the server asks for no token).
func authLine(addr string) string {
	if tok, ok := treeTokens.Load(addr); ok {
		return "Authorization: Bearer " + tok.(string) + "\r\n"
	}
	return ""
}

// startServer serves the dashboard on a free loopback port until the test
// ends and returns its base URL. Without o.Token the port asks for the
// tree's token, which the package's plain requests then carry (treeAuth).
func startServer(t testing.TB, o Options) (*Server, string) {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Tmux == nil {
		o.Tmux = noTmux{}
	}
	s, err := New(withStore(t, o))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if o.Token == "" && o.Listen != config.ListenUnix {
		trustTree(t, o.Layout, s.Addr())
	}
	return s, "http://" + s.Addr()
}

// withStore gives o the files store of its layout (closed when the test
// ends) unless it has a store already.
func withStore(t testing.TB, o Options) Options {
	t.Helper()
	if o.Store == nil {
		st, err := files.Open(o.Layout, "test-host")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		o.Store = st
	}
	return o
}

// filesQueue is the queue of kind as the roles on this machine write it:
// on their own files store of l, closed when the test ends.
func filesQueue(t testing.TB, l layout.Layout, kind string) *queue.Queue {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return queue.OnStore(st, l, kind, nil, "test-host")
}

func emitter(l layout.Layout, actor string) *eventlog.Emitter {
	return eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), actor, clock.Real{})
}

// split renames events.log to its daily name the way the chamberlain does
// (SPEC §9.11): under the rotation lock taken exclusively.
func split(t testing.TB, l layout.Layout, day string) {
	t.Helper()
	err := lockfile.With(l.RotateLock(), func() error {
		return os.Rename(l.EventsLog(), l.EventsLogDay(day))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sseEvent is one event read off a stream.
type sseEvent struct {
	ID, Data string
}

// sseClient reads a text/event-stream response.
type sseClient struct {
	resp *http.Response
	br   *bufio.Reader
	// Comments are the comment lines seen so far.
	Comments []string
}

func openSSE(t testing.TB, url, lastID string, header ...string) *sseClient {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	c := &sseClient{resp: resp, br: bufio.NewReader(resp.Body)}
	t.Cleanup(c.Close)
	return c
}

func (c *sseClient) Close() { c.resp.Body.Close() }

// Next returns the next event (comments are recorded and skipped).
func (c *sseClient) Next() (sseEvent, error) {
	var ev sseEvent
	got := false
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if got {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			c.Comments = append(c.Comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			ev.ID, got = line[4:], true
		case strings.HasPrefix(line, "data: "):
			ev.Data, got = line[6:], true
		}
	}
}

// WaitComment reads until a comment starting with prefix arrives.
func (c *sseClient) WaitComment(t testing.TB, prefix string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, cm := range c.Comments {
			if strings.HasPrefix(cm, prefix) {
				return
			}
		}
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before comment %q: %v", prefix, err)
		}
		if s, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), ":"); ok {
			c.Comments = append(c.Comments, strings.TrimSpace(s))
		}
	}
	t.Fatalf("no comment %q", prefix)
}
