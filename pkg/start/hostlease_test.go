package start

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// filesHost is a Host on a files store of l, opened by each Open.
func filesHost(l layout.Layout, id string) Host {
	return Host{ID: id, Version: "test", Started: time.Now(), Open: func(context.Context) (store.Store, error) { return files.Open(l, id) }}
}

func TestRenewEvery_ThirtySecondsOrAFifthOfTheFence(t *testing.T) {
	for _, c := range []struct{ fence, want time.Duration }{
		{300 * time.Second, 30 * time.Second},
		{150 * time.Second, 30 * time.Second},
		{100 * time.Second, 20 * time.Second},
		{10 * time.Second, 2 * time.Second},
	} {
		if got := RenewEvery(c.fence); got != c.want {
			t.Errorf("RenewEvery(%s) = %s, want %s", c.fence, got, c.want)
		}
	}
}

// syncBuf is a log sink safe for the race detector.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// flaky is a store whose RenewHost fails while fail is set.
type flaky struct {
	store.Store
	fail *atomic.Bool
}

func (f flaky) RenewHost(ctx context.Context, id, v string, at time.Time) error {
	if f.fail.Load() {
		return errors.New("dial tcp: connection refused")
	}
	return f.Store.RenewHost(ctx, id, v, at)
}

func testLayout(t *testing.T) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(l.RoleStateDir(layout.RoleStart), 0o700)
	return l
}

func TestHostLease_TouchesOnSuccessLogsOncePerChange(t *testing.T) {
	l := testLayout(t)
	var logs syncBuf
	var fail atomic.Bool
	fail.Store(true)
	host := filesHost(l, "test-host")
	host.Open = func(context.Context) (store.Store, error) {
		st, err := files.Open(l, "test-host")
		return flaky{st, &fail}, err
	}
	h := newHostLease(Options{Layout: l, Log: slog.New(slog.NewTextHandler(&logs, nil)), Host: host}, 300*time.Second)
	t.Cleanup(h.close)
	ctx := context.Background()
	for range 3 {
		if h.step(ctx) == nil {
			t.Fatal("a failed renewal reported success")
		}
	}
	if _, err := os.Stat(l.HostLease()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("host-lease exists after failed renewals only (%v): generals would trust a renewal that never happened", err)
	}
	if n := logs.count("renewal failed"); n != 1 {
		t.Fatalf("%d failure lines for 3 failures, want 1", n)
	}
	fail.Store(false)
	if err := h.step(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(l.HostLease())
	if err != nil {
		t.Fatalf("no host-lease after a renewal: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("host-lease mode %v, want 0600", fi.Mode().Perm())
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(l.HostLease(), old, old)
	h.step(ctx)
	h.step(ctx)
	if fi, _ := os.Stat(l.HostLease()); !fi.ModTime().After(old) {
		t.Fatal("a renewal did not move host-lease's mtime")
	}
	if n := logs.count("renewed again"); n != 1 {
		t.Fatalf("%d recovery lines, want 1", n)
	}
	fail.Store(true)
	h.step(ctx)
	if n := logs.count("renewal failed"); n != 2 {
		t.Fatalf("%d failure lines after a second outage, want 2", n)
	}
}

// A second start with the same host id is refused, naming the lease's
// holder and since when; the first keeps its lease.
func TestHostLease_ASecondHostWithTheSameIDIsRefused(t *testing.T) {
	l := testLayout(t)
	ctx := context.Background()
	first := newHostLease(Options{Layout: l, Log: logging.Discard(), Host: filesHost(l, "box-a")}, 300*time.Second)
	t.Cleanup(first.close)
	if err := first.step(ctx); err != nil {
		t.Fatal(err)
	}
	second := newHostLease(Options{Layout: l, Log: logging.Discard(), Host: filesHost(l, "box-a")}, 300*time.Second)
	t.Cleanup(second.close)
	err := second.step(ctx)
	var held *HostHeldError
	if !errors.As(err, &held) || !errors.Is(err, store.ErrHeld) {
		t.Fatalf("second start with box-a: %v, want HostHeldError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `host id "box-a" is live on another host`) || !strings.Contains(msg, "host-box-a held by box-a since 20") {
		t.Fatalf("refusal %q does not name the holder and since when", msg)
	}
	if first.step(ctx) != nil || first.lease == nil {
		t.Fatal("the first host lost its lease to the refused one")
	}
}

// lossy wraps a store's leases so the test can end one (a database blink).
type lossy struct {
	store.Store
	leases *[]*lostLease
}

type lostLease struct {
	store.Lease
	lost chan struct{}
}

func (l *lostLease) Lost() <-chan struct{} { return l.lost }

func (s lossy) Lead(ctx context.Context, name string) (store.Lease, error) {
	ls, err := s.Store.Lead(ctx, name)
	if err != nil {
		return nil, err
	}
	w := &lostLease{Lease: ls, lost: make(chan struct{})}
	*s.leases = append(*s.leases, w)
	return w, nil
}

// A lease lost while start runs (the database blinked) is taken again at
// the next renewal; the step does not fail, so nothing stops.
func TestHostLease_RetakesALostLease(t *testing.T) {
	l := testLayout(t)
	var leases []*lostLease
	host := filesHost(l, "box-a")
	host.Open = func(context.Context) (store.Store, error) {
		st, err := files.Open(l, "box-a")
		return lossy{st, &leases}, err
	}
	h := newHostLease(Options{Layout: l, Log: logging.Discard(), Host: host}, 300*time.Second)
	t.Cleanup(h.close)
	ctx := context.Background()
	if err := h.step(ctx); err != nil || len(leases) != 1 {
		t.Fatalf("first step: %v, %d leases", err, len(leases))
	}
	// The session ended: the flock goes with it.
	leases[0].Lease.Release()
	close(leases[0].lost)
	if err := h.step(ctx); err != nil {
		t.Fatalf("step after the lease was lost: %v", err)
	}
	if len(leases) != 2 || h.lease != leases[1] {
		t.Fatalf("lease not taken again: %d leases", len(leases))
	}
}

// kingdom.env changed: start re-applies it and its store is reopened (the
// old one closed) with the new DSN, at once.
func TestHostLease_ReopensTheStoreWhenKingdomEnvChanges(t *testing.T) {
	l := testLayout(t)
	os.WriteFile(l.EnvFile(), []byte("KINGDOM_TEST_DSN=old\n"), 0o600)
	t.Setenv("KINGDOM_TEST_DSN", "")
	os.Unsetenv("KINGDOM_TEST_DSN")
	sources, err := config.ApplySecrets("", l.EnvFile(), func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	var dsns []string
	var closed atomic.Int32
	host := filesHost(l, "box-a")
	host.Open = func(context.Context) (store.Store, error) {
		dsns = append(dsns, os.Getenv("KINGDOM_TEST_DSN"))
		st, err := files.Open(l, "box-a")
		return closing{st, &closed}, err
	}
	host.Reload = func() error {
		s, err := ReloadSecrets(l.EnvFile(), sources)
		sources = s
		return err
	}
	w := &Watchdog{o: Options{Layout: l, Log: logging.Discard(), Host: host}, cfg: newConfigWatch(l)}
	w.hl = newHostLease(w.o, 300*time.Second)
	t.Cleanup(w.hl.close)
	ctx := context.Background()
	if err := w.hl.step(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.EnvFile(), []byte("KINGDOM_TEST_DSN=fixed-password\n"), 0o600)
	w.noticeConfig()
	select {
	case <-w.hl.kick:
	default:
		t.Fatal("a kingdom.env change did not wake the host lease")
	}
	if err := w.hl.step(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dsns) != 2 || dsns[0] != "old" || dsns[1] != "fixed-password" {
		t.Fatalf("store opened with DSNs %q, want old then fixed-password", dsns)
	}
	if closed.Load() != 1 {
		t.Fatalf("old store closed %d times, want 1", closed.Load())
	}
	if w.hl.lease == nil {
		t.Fatal("no host lease on the reopened store")
	}
}

type closing struct {
	store.Store
	n *atomic.Int32
}

func (c closing) Close() error { c.n.Add(1); return c.Store.Close() }

func TestReloadSecrets_TheEnvironmentStillWins(t *testing.T) {
	dir := t.TempDir()
	env := dir + "/kingdom.env"
	os.WriteFile(env, []byte("A_SECRET=one\nB_SECRET=two\nGONE_SECRET=x\n"), 0o600)
	for _, k := range []string{"A_SECRET", "B_SECRET", "GONE_SECRET", "NEW_SECRET"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("B_SECRET", "from-env")
	src, err := config.ApplySecrets("", env, func(k string) bool { return strings.HasSuffix(k, "_SECRET") })
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(env, []byte("A_SECRET=uno\nB_SECRET=dos\nNEW_SECRET=n\n"), 0o600)
	src, err = ReloadSecrets(env, src)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("A_SECRET") != "uno" || os.Getenv("B_SECRET") != "from-env" || os.Getenv("NEW_SECRET") != "n" {
		t.Fatalf("A=%q B=%q NEW=%q", os.Getenv("A_SECRET"), os.Getenv("B_SECRET"), os.Getenv("NEW_SECRET"))
	}
	if _, set := os.LookupEnv("GONE_SECRET"); set {
		t.Fatal("a secret removed from kingdom.env is still set")
	}
	if src["A_SECRET"] != config.SourceEnvFile || src["B_SECRET"] != config.SourceEnvironment || src["GONE_SECRET"] != "" {
		t.Fatalf("sources %v", src)
	}
}

func TestRecordHostID_WhereTheRolesResolveIt(t *testing.T) {
	l := testLayout(t)
	if err := RecordHostID(l, "box-a"); err != nil {
		t.Fatal(err)
	}
	p := config.HostIDRecord(l.StateDir())
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %s: %v", p, err)
	}
	t.Setenv(config.HostIDEnv, "")
	cfg := config.DefaultStore()
	cfg.HostID, cfg.HostIDFile = "from-yaml", p
	if id, err := cfg.ResolveHostID(); err != nil || id != "box-a" {
		t.Fatalf("ResolveHostID = %q, %v; want the recorded box-a", id, err)
	}
}

func TestRenewHost_RegistersThisHostAndItsLeaseInPostgres(t *testing.T) {
	dsn := pgtest.DB(t)
	t.Setenv("KINGDOM_TEST_DSN", dsn)
	ctx := context.Background()
	l := testLayout(t)
	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv, cfg.HostID = config.StorePostgres, "KINGDOM_TEST_DSN", "box-a"
	host := Host{ID: "box-a", Version: "v9", Started: time.Now().Add(-time.Minute),
		Open: func(ctx context.Context) (store.Store, error) { return open.Store(ctx, cfg, l) }}
	h := newHostLease(Options{Layout: l, Log: logging.Discard(), Host: host}, cfg.SelfFence())
	t.Cleanup(h.close)
	if err := h.step(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := open.Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.Hosts(ctx, cfg.SelfFence())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "box-a" || list[0].Version != "v9" || !list[0].Alive {
		t.Fatalf("hosts %+v, want box-a v9 alive", list)
	}
	if _, err := os.Stat(l.HostLease()); err != nil {
		t.Fatalf("host-lease not touched: %v", err)
	}
	// A second machine with box-a: refused, naming the first.
	second := newHostLease(Options{Layout: l, Log: logging.Discard(), Host: host}, cfg.SelfFence())
	t.Cleanup(second.close)
	err = second.step(ctx)
	var held *HostHeldError
	if !errors.As(err, &held) || held.Holder != "box-a" || held.Since.IsZero() {
		t.Fatalf("second box-a: %v (%+v), want refused naming box-a and since when", err, held)
	}
}
