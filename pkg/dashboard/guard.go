package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// allowedHosts lists the Host names a request may carry besides loopback
// addresses: localhost, the listen host and the configured names. A
// wildcard listen host (empty, 0.0.0.0, ::) serves every address of the
// machine, so any address literal names it; names still have to be listed.
// Address literals are safe to accept in general: DNS rebinding needs a
// name the attacker's DNS answers for.
func allowedHosts(listen string, extra []string) (map[string]bool, bool) {
	hosts := map[string]bool{"localhost": true}
	anyIP := false
	if listen != config.ListenUnix {
		if h, _, err := net.SplitHostPort(listen); err == nil {
			if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
				anyIP = true
			} else {
				hosts[normHost(h)] = true
			}
		}
	}
	for _, h := range extra {
		hosts[normHost(h)] = true
	}
	return hosts, anyIP
}

// normHost is a Host value without its port, brackets, case and final dot.
func normHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.ToLower(h)
}

func (s *Server) hostAllowed(host string) bool {
	h := normHost(host)
	if h == "" {
		return false
	}
	if ip := net.ParseIP(h); ip != nil && (ip.IsLoopback() || s.anyIP) {
		return true
	}
	return s.hosts[h]
}

// checkHost answers 421 to a request for a name that is not this
// dashboard's. A page on a DNS-rebinding name (evil.example resolving to
// 127.0.0.1) is same-origin with whatever listens there, so without this
// check its script could read the loopback dashboard; it cannot change the
// Host header its browser sends.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, fmt.Sprintf("misdirected request: Host %q is not a name of this dashboard (chamberlain.yaml http.allowed_hosts lists more)", r.Host), http.StatusMisdirectedRequest)
	})
}

// limitListener hands out at most cap(sem) connections at a time; one
// accepted beyond that is closed at once (the client sees the connection
// end rather than waiting in the kernel's queue).
type limitListener struct {
	net.Listener
	sem  chan struct{}
	full func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, sem: l.sem}, nil
		default:
			c.Close()
			l.full()
		}
	}
}

type limitConn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.sem })
	return err
}

// rateLog writes at most one line per interval and counts the rest into
// the next. As http.Server.ErrorLog's writer it carries net/http's own
// complaints (accept errors such as running out of descriptors) to the
// role's log.
type rateLog struct {
	to    *slog.Logger
	clk   clock.Clock
	every time.Duration
	level slog.Level

	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (r *rateLog) log(msg string, args ...any) {
	r.mu.Lock()
	now := r.clk.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.dropped++
		r.mu.Unlock()
		return
	}
	n := r.dropped
	r.last, r.dropped = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	r.to.Log(context.Background(), r.level, msg, args...)
}

// Write takes one line from a log.Logger.
func (r *rateLog) Write(p []byte) (int, error) {
	r.log("dashboard: http server", "err", strings.TrimSpace(string(p)))
	return len(p), nil
}

// listenUnix binds the dashboard's socket: mode 0600 in a 0700 directory,
// so only the kingdom's user can connect. A socket left by a chamberlain
// that died is removed; one that still answers belongs to a live server
// and is left alone. Anything else at the path is an error, never deleted.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := layout.EnsureDir(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("dashboard socket dir %s: not a directory", dir)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("dashboard socket %s: a %s is in the way; remove it", path, fi.Mode().Type())
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("dashboard socket %s: another server answers on it", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale dashboard socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on dashboard socket %s: %w", path, err)
	}
	// The 0700 directory already keeps others out between bind and chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod dashboard socket %s: %w", path, err)
	}
	return ln, nil
}
