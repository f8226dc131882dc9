package pgtest

import (
	"context"
	"os"
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
