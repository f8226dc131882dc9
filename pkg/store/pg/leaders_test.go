package pg

import (
	"context"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
)

func TestLeaders_HolderEpochAndHeld(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	a, err := Open(ctx, dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if m, err := a.Leaders(ctx); err != nil || len(m) != 0 {
		t.Fatalf("no leader yet: %v %v", m, err)
	}
	la, err := a.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Leaders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if li := m["king"]; li.Holder != "host-a" || li.Epoch != 1 || !li.Held || li.Since.IsZero() {
		t.Fatalf("king while host-a leads: %+v", li)
	}
	la.Release()
	m, _ = b.Leaders(ctx)
	if li := m["king"]; li.Held || li.Holder != "host-a" {
		t.Fatalf("king after release: %+v (the row stays, the lock is gone)", li)
	}
	lb, err := b.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release()
	if _, err := a.Lead(ctx, "envoy"); err != nil {
		t.Fatal(err)
	}
	m, _ = a.Leaders(ctx)
	if li := m["king"]; li.Holder != "host-b" || li.Epoch != 2 || !li.Held {
		t.Fatalf("king after host-b took it: %+v", li)
	}
	if li := m["envoy"]; li.Holder != "host-a" || !li.Held {
		t.Fatalf("envoy: %+v", li)
	}
}

func TestConnect_OneSessionNoDSNInErrors(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	c, err := Connect(ctx, dsn+"&keepalives_idle=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %v", err)
	}
	_, err = Connect(ctx, "postgres://u:s3cret@127.0.0.1:1/x?sslmode=disable&keepalives_idle=x")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad keepalive: %v", err)
	}
}
