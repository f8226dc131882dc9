package start

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

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

func TestHostLease_TouchesOnSuccessLogsOncePerChange(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(l.RoleStateDir(layout.RoleStart), 0o700)
	var logs syncBuf
	fail := true
	h := newHostLease(Options{Layout: l, Log: slog.New(slog.NewTextHandler(&logs, nil)), Renew: func(context.Context) error {
		if fail {
			return errors.New("dial tcp: connection refused")
		}
		return nil
	}}, 300*time.Second)
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
	fail = false
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
	fail = true
	h.step(ctx)
	if n := logs.count("renewal failed"); n != 2 {
		t.Fatalf("%d failure lines after a second outage, want 2", n)
	}
}

func TestRenewHost_RegistersThisHostInPostgres(t *testing.T) {
	dsn := pgtest.DB(t)
	t.Setenv("KINGDOM_TEST_DSN", dsn)
	ctx := context.Background()
	l := layout.New(t.TempDir())
	l.Ensure()
	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv = config.StorePostgres, "KINGDOM_TEST_DSN"
	st, err := open.Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	started := time.Now().Add(-time.Minute)
	h := newHostLease(Options{Layout: l, Log: app.Discard(), Renew: RenewHost(st, "box-a", "v9", started)}, cfg.SelfFence())
	os.MkdirAll(l.RoleStateDir(layout.RoleStart), 0o700)
	if err := h.step(ctx); err != nil {
		t.Fatal(err)
	}
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
}
