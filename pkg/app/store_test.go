package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgTree is a tree whose system.yaml selects postgres with its DSN in
// variable dsnEnv.
func pgTree(t *testing.T, dsnEnv, host string) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := fmt.Sprintf("store:\n  kind: postgres\n  dsn_env: %s\n  host_id: %s\n", dsnEnv, host)
	if err := os.WriteFile(l.ConfigFile(config.SystemFile), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSetup_FilesStoreOpensOnFirstUseOnly(t *testing.T) {
	l := layout.New(t.TempDir())
	t.Setenv(config.HostIDEnv, "box-1")
	env, err := setupWithStore(layout.RoleKing, l.Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if env.HostID != "box-1" || (env.System.Store.Kind == config.StorePostgres) {
		t.Fatalf("host %q postgres %v, want box-1 in files mode", env.HostID, (env.System.Store.Kind == config.StorePostgres))
	}
	storeDir := l.StateDir() + "/store"
	if _, err := os.Stat(storeDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Setup created %s (%v): a files-mode role that never uses the store must create nothing new", storeDir, err)
	}
	if o := env.RunnerOptions(&cli.Command{}); o.Lead == nil {
		t.Fatal("files mode: the king must lead by the store's lease (its lock file) as in postgres mode")
	}
	st, err := OpenStore(context.Background(), env.Store)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*files.Store); !ok {
		t.Fatalf("opened %T, want *files.Store", st)
	}
	if _, err := os.Stat(storeDir); err != nil {
		t.Fatalf("after first use: %v", err)
	}
	if _, err := testPool(context.Background(), env.Store); err == nil {
		t.Fatal("Pool in files mode: want an error")
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Values(context.Background(), store.NSPauses); err == nil {
		t.Fatal("a closed store still answers")
	}
}

func TestSetup_BrokenSystemYAMLIsAConfigError(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.ConfigFile(config.SystemFile), []byte("store:\n  kind: etcd\n"), 0o600)
	_, err := setupWithStore(layout.RoleKing, l.Base, io.Discard)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "store.kind") {
		t.Fatalf("store.kind etcd: %v (exit %d), want a config error naming store.kind", err, ExitCode(err))
	}
}

func TestSetup_PostgresWithoutDSNNamesTheVariableOnly(t *testing.T) {
	l := pgTree(t, "KINGDOM_TEST_DSN", "box-1")
	os.Unsetenv("KINGDOM_TEST_DSN")
	_, err := setupWithStore(layout.RoleKing, l.Base, io.Discard)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "KINGDOM_TEST_DSN is not set") {
		t.Fatalf("no DSN: %v (exit %d), want a config error naming KINGDOM_TEST_DSN", err, ExitCode(err))
	}
}

func TestSetup_PostgresLeaderRolesLeadByLease(t *testing.T) {
	dsn := pgtest.DB(t)
	t.Setenv("KINGDOM_TEST_DSN", dsn)
	os.Unsetenv(config.HostIDEnv)
	ctx := context.Background()
	a, err := setupWithStore(layout.RoleKing, pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := setupWithStore(layout.RoleKing, pgTree(t, "KINGDOM_TEST_DSN", "box-b").Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !(a.System.Store.Kind == config.StorePostgres) || a.HostID != "box-a" {
		t.Fatalf("postgres %v host %q", (a.System.Store.Kind == config.StorePostgres), a.HostID)
	}
	if _, err := testPool(ctx, a.Store); err != nil {
		t.Fatalf("pool: %v", err)
	}
	oa, ob := a.RunnerOptions(&cli.Command{}), b.RunnerOptions(&cli.Command{})
	if oa.Lead == nil || ob.Lead == nil {
		t.Fatal("postgres mode: the king must lead by the store's lease")
	}
	la, err := oa.Lead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	_, err = ob.Lead(ctx)
	if !errors.Is(err, store.ErrHeld) || ExitCode(fmt.Errorf("king: %w", err)) != ExitLeaderHeld {
		t.Fatalf("second king: %v (exit %d), want ErrHeld and exit %d", err, ExitCode(err), ExitLeaderHeld)
	}
	m, err := b.Store.Leaders(ctx)
	if err != nil || m[layout.RoleKing].Holder != "box-a" || !m[layout.RoleKing].Held {
		t.Fatalf("leaders %+v %v: want king held by box-a", m, err)
	}
	// Per-host roles keep their lock file.
	for _, role := range []string{layout.RoleSentinel, layout.RoleChamberlain, "gen-review"} {
		e := *a
		e.Role = role
		if e.RunnerOptions(&cli.Command{}).Lead != nil {
			t.Errorf("%s: per-host role got a lease", role)
		}
	}
	for _, role := range []string{layout.RoleEnvoy} {
		e := *a
		e.Role = role
		if e.RunnerOptions(&cli.Command{}).Lead == nil {
			t.Errorf("%s: leader role without a lease", role)
		}
	}
	inner, _ := OpenStore(ctx, a.Store)
	if _, ok := inner.(*pg.Store); !ok {
		t.Fatalf("opened %T, want *pg.Store", inner)
	}
}

func TestSetup_PostgresUnreachableFailsTheCallNotSetup(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", "postgres://kingdom:hunter2secret@127.0.0.1:1/none?sslmode=disable")
	env, err := setupWithStore(layout.RoleKing, pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base, io.Discard)
	if err != nil {
		t.Fatalf("Setup: %v (connecting is the first use's business)", err)
	}
	defer env.Close()
	_, err = env.Store.Lead(context.Background(), layout.RoleKing)
	if err == nil || errors.Is(err, store.ErrHeld) || strings.Contains(err.Error(), "hunter2secret") {
		t.Fatalf("Lead on a dead server: %v, want a connect error without the password", err)
	}
	if !strings.Contains(err.Error(), "KINGDOM_TEST_DSN") {
		t.Errorf("error %q does not name the DSN's variable", err)
	}
}

func TestExitCode_Leadership(t *testing.T) {
	if got := ExitCode(fmt.Errorf("king epoch 3: %w", runner.ErrLeadershipLost)); got != ExitLeadershipLost {
		t.Errorf("lost lease: exit %d, want %d", got, ExitLeadershipLost)
	}
	if got := ExitCode(fmt.Errorf("lead king: %w", store.ErrHeld)); got != ExitLeaderHeld {
		t.Errorf("held lease: exit %d, want %d", got, ExitLeaderHeld)
	}
}

// setupWithStore is SetupWith as a role's command does it: with the store
// opener.
func setupWithStore(role, base string, stdout io.Writer) (*Env, error) {
	env, err := SetupWith(role, base, stdout)
	if err == nil {
		env.SetStoreOpener(open.Store)
	}
	return env, err
}

func testPool(ctx context.Context, st store.Store) (*pgxpool.Pool, error) {
	inner, err := OpenStore(ctx, st)
	if err != nil {
		return nil, err
	}
	return open.Pool(inner)
}
