package open

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestStore_PicksTheKind(t *testing.T) {
	ctx := context.Background()
	l := layout.New(t.TempDir())
	st, err := Store(ctx, config.DefaultStore(), l)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*files.Store); !ok {
		t.Errorf("kind files opened %T", st)
	}
	st.Close()

	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv, cfg.HostID = config.StorePostgres, "KT_TEST_DSN", "host-a"
	t.Setenv(config.HostIDEnv, "")
	t.Setenv("KT_TEST_DSN", pgtest.DB(t))
	st, err = Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*pg.Store); !ok {
		t.Fatalf("kind postgres opened %T", st)
	}
	// The host id reaches the leaders table.
	lease, err := st.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var holder string
	if err := st.(*pg.Store).Pool().QueryRow(ctx, "SELECT holder FROM leaders WHERE name='king'").Scan(&holder); err != nil || holder != "host-a" {
		t.Errorf("leader holder %q %v, want host-a", holder, err)
	}
}

// A missing DSN names its variable; a DSN that does not parse never shows
// its value (it may hold a password).
func TestStore_DSNErrorsNeverShowTheValue(t *testing.T) {
	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv, cfg.HostID = config.StorePostgres, "KT_TEST_DSN", "host-a"
	t.Setenv(config.HostIDEnv, "")
	t.Setenv("KT_TEST_DSN", "")
	_, err := Store(context.Background(), cfg, layout.New(t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "KT_TEST_DSN is not set") {
		t.Fatalf("missing DSN: %v", err)
	}
	t.Setenv("KT_TEST_DSN", "postgres://u:hunter2-secret@[::1/x")
	_, err = Store(context.Background(), cfg, layout.New(t.TempDir()))
	if err == nil || strings.Contains(err.Error(), "hunter2-secret") || !strings.Contains(err.Error(), "KT_TEST_DSN") {
		t.Fatalf("bad DSN: %v", err)
	}
}
