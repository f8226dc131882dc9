// Package pgtest starts Debian's PostgreSQL for tests: one server per test
// binary (initdb into a temp dir as an unprivileged user, loopback only, a
// unix socket in the temp dir), and a fresh database per test made from a
// template. Tests skip when the binaries are missing, except under CI=true,
// where they fail (SPEC §11.7).
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//	func TestX(t *testing.T) { dsn := pgtest.DB(t) ... }
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running test server.
type Server struct {
	bin  string // directory of initdb, pg_ctl, postgres
	root string // temp dir (0755) holding data/ and the socket
	data string
	port int
	cred *syscall.Credential // nil when not root
	log  string
	opts string // the server's -o options, kept for Restart
}

var (
	once    sync.Once
	shared  *Server
	initErr error
	dbSeq   atomic.Int64
)

// Main runs the tests of a package and stops the shared server after
// them. Use it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// Bin returns the directory holding initdb and pg_ctl, or "".
func Bin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p)
		}
	}
	// Debian keeps them off PATH, one directory per major version: take
	// the newest.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Shared starts (once) and returns the binary's server; it skips t (fails
// it under CI=true) when PostgreSQL is not installed.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := need(t)
	once.Do(func() { shared, initErr = start(bin, false) })
	if initErr != nil {
		t.Fatalf("start test PostgreSQL: %v", initErr)
	}
	return shared
}

// need returns the binaries' directory; it skips t (fails it under
// CI=true) when PostgreSQL is not installed.
func need(t testing.TB) string {
	t.Helper()
	bin := Bin()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL binaries (initdb, pg_ctl) not found; install Debian's postgresql package")
		}
		t.Skip("PostgreSQL binaries (initdb, pg_ctl) not found")
	}
	return bin
}

// New starts a server of t's own, stopped when t ends: for tests that
// restart or crash the server (Restart), which must not disturb the
// binary's other tests on the shared one.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := start(need(t), true)
	if err != nil {
		t.Fatalf("start test PostgreSQL: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Restart crashes the server (pg_ctl stop -m immediate: every session is
// cut without a clean shutdown, as when the machine dies) and starts it
// again on the same data dir and port; it returns once the server accepts
// connections again, after crash recovery.
func (s *Server) Restart() error {
	if err := s.Down(); err != nil {
		return err
	}
	return s.Up()
}

// Down stops the server at once (pg_ctl stop -m immediate: every session
// is cut without a clean shutdown) and keeps its data dir and port, so Up
// brings the same database back: a database outage.
func (s *Server) Down() error {
	if out, err := s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// Up starts a server Down stopped, on the same data dir and port; it
// returns once the server accepts connections again, after crash recovery.
func (s *Server) Up() error { return s.serve() }

// DB creates a fresh database for t on the shared server and returns its
// DSN. The database is dropped when t ends.
func DB(t testing.TB) string {
	t.Helper()
	return Shared(t).DB(t)
}

// DB creates a fresh database for t on s and returns its DSN. The
// database is dropped when t ends.
func (s *Server) DB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx := context.Background()
	admin := s.DSN("postgres")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return s.DSN(name)
}

// DSN returns the connection string of database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://kingdom@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// WithKeepalives returns dsn asking for short TCP keepalives (idle,
// interval and count as pkg/store/pg reads them), so a client notices a
// dead server or link within seconds.
func WithKeepalives(dsn string, idle, interval, count int) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%skeepalives=1&keepalives_idle=%d&keepalives_interval=%d&keepalives_count=%d", dsn, sep, idle, interval, count)
}

// Via returns dsn (one of s's) reaching the server through addr
// (host:port, e.g. a tcpproxy in front of it) instead of its own port.
func (s *Server) Via(dsn, addr string) string {
	return strings.Replace(dsn, s.Addr(), addr, 1)
}

// Addr returns the server's loopback address (host:port).
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Port returns the server's loopback port.
func (s *Server) Port() int { return s.port }

// start runs initdb and the server. durable keeps synchronous_commit on:
// an immediate stop (Restart) then loses no acknowledged commit, since the
// WAL reached the kernel before the commit returned (fsync stays off: the
// machine itself does not crash).
func start(bin string, durable bool) (*Server, error) {
	root, err := os.MkdirTemp("", "kingdom-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, root: root, data: filepath.Join(root, "data"), log: filepath.Join(root, "server.log")}
	if os.Geteuid() == 0 {
		// initdb refuses root: run it and the server as nobody, who must
		// be able to reach the temp dir.
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("look up nobody: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(root, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(root, uid, gid); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.port = port
	if out, err := s.run("initdb", "-D", s.data, "-U", "kingdom", "--auth=trust", "--no-sync", "-E", "UTF8", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	sync := "off"
	if durable {
		sync = "on"
	}
	s.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off "+
		"-c synchronous_commit=%s -c full_page_writes=off -c max_connections=200 "+
		"-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3", port, root, sync)
	if err := s.serve(); err != nil {
		return nil, err
	}
	return s, nil
}

// serve starts the server on its data dir and port and waits until it
// accepts connections.
func (s *Server) serve() error {
	if out, err := s.run("pg_ctl", "-D", s.data, "-l", s.log, "-o", s.opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(s.log)
		return fmt.Errorf("pg_ctl start: %w: %s %s", err, out, log)
	}
	return nil
}

// Stop stops the server at once and removes its files.
func (s *Server) Stop() {
	s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.root)
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.root
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds; pg_ctl then fails loudly.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
