package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestDB_FreshDatabasePerTest(t *testing.T) {
	ctx := context.Background()
	a, b := DB(t), DB(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE x (i int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename='x'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table of one test visible in another's database")
	}
	var idle string
	if err := ca.QueryRow(ctx, "SHOW tcp_keepalives_idle").Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != "5" {
		t.Fatalf("tcp_keepalives_idle = %s, want 5", idle)
	}
	var addr string
	if err := ca.QueryRow(ctx, "SHOW listen_addresses").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1" {
		t.Fatalf("listen_addresses = %s, want loopback only", addr)
	}
}

func TestRestart_CrashesAndComesBackWithTheData(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	if s == shared {
		t.Fatal("New returned the shared server")
	}
	dsn := s.DB(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (i int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// The old session died with the server.
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a session survived an immediate stop")
	}
	c.Close(ctx)
	c, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("reconnect after restart: %v", err)
	}
	defer c.Close(ctx)
	var i int
	if err := c.QueryRow(ctx, "SELECT i FROM kept").Scan(&i); err != nil || i != 7 {
		t.Fatalf("committed row after restart: %d, %v", i, err)
	}
	if got := s.Via(s.DSN("x"), "127.0.0.1:1"); got != "postgres://kingdom@127.0.0.1:1/x?sslmode=disable" {
		t.Errorf("Via = %s", got)
	}
	// pgx refuses libpq's keepalive keys; pkg/store/pg reads them.
	if got := WithKeepalives(dsn, 1, 2, 3); !strings.HasSuffix(got, "?sslmode=disable&keepalives=1&keepalives_idle=1&keepalives_interval=2&keepalives_count=3") {
		t.Errorf("WithKeepalives = %s", got)
	}
}

func TestDownUp_RefusesWhileDownThenServesTheSameDatabase(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	dsn := s.DB(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (i int); INSERT INTO kept VALUES (9)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if err := s.Down(); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a server that is down")
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after Up: %v", err)
	}
	defer c.Close(ctx)
	var i int
	if err := c.QueryRow(ctx, "SELECT i FROM kept").Scan(&i); err != nil || i != 9 {
		t.Fatalf("row after Up: %d, %v", i, err)
	}
}
