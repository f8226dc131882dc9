package pg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/store"
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

// A leader that stopped renewing (frozen, or hung in a tick) while its
// session stays connected is deposed by a standby once the stall window
// has passed: the standby ends its session and leads; the old lease is
// lost. One that renews is never deposed.
func TestLead_StandbyDeposesAStalledLeader(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	a, err := Open(ctx, dsn, "host-a", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, "host-b", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.LeaseCheck = 50 * time.Millisecond
	la, err := a.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	if err := la.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lead(ctx, "king"); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("standby while the leader renews: %v, want ErrHeld", err)
	}
	// The leader's last renewal is now two minutes old (the database's
	// clock), as after a freeze.
	if _, err := a.pool.Exec(ctx, "UPDATE leaders SET renewed_at = now() - interval '2 minutes' WHERE name='king'"); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lead(ctx, "king")
	if err != nil {
		t.Fatalf("standby after the leader stalled: %v, want the lead", err)
	}
	defer lb.Release()
	if lb.Epoch() != la.Epoch()+1 {
		t.Fatalf("epoch %d after %d", lb.Epoch(), la.Epoch())
	}
	select {
	case <-la.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the deposed leader's lease was not lost")
	}
	if err := a.Update(ctx, func(tx store.Tx) error {
		tx.Fence(la)
		return tx.Set("sequences", "x", []byte("1"))
	}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write of the deposed leader: %v, want ErrFenced", err)
	}
}

// A standby ends only the session that holds the lock: a stale row whose
// backend_pid names another session (a new leader that took the lock and
// has not written its row yet; an old pid the server gave to another
// backend) ends nothing, and the standby stays a standby.
func TestLead_StandbyEndsOnlyTheLockHolder(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	a, err := Open(ctx, dsn, "host-a", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, "host-b", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, err := a.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	bystander, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer bystander.Close(ctx)
	var pid int32
	if err := bystander.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, "UPDATE leaders SET renewed_at = now() - interval '2 minutes', backend_pid=$1 WHERE name='king'", pid); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lead(ctx, "king"); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("standby facing a row that names a bystander: %v, want ErrHeld", err)
	}
	if err := bystander.Ping(ctx); err != nil {
		t.Fatalf("the bystander's session was ended: %v", err)
	}
	select {
	case <-la.Lost():
		t.Fatal("the leader's lease was lost")
	default:
	}
}

// A frozen leader caught between its fence (FOR SHARE on its leaders row)
// and its commit leaves that transaction open on a pool connection after
// its lease session is ended: the standby ends it too, and leads, rather
// than wait on the row for ever. The open transaction's commit fails.
func TestLead_StandbyEndsAFrozenFencedCommit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	a, err := Open(ctx, dsn, "host-a", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, "host-b", Options{LeaderStall: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, err := a.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	// Its last renewal two minutes old (the database's clock), as after a
	// freeze; then the commit it froze in, past its fence.
	if _, err := b.pool.Exec(ctx, "UPDATE leaders SET renewed_at = now() - interval '2 minutes' WHERE name='king'"); err != nil {
		t.Fatal(err)
	}
	frozen, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback(ctx)
	if err := la.(*lease).fence(ctx, frozen); err != nil {
		t.Fatalf("fence: %v", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a deadline, not a measurement
	defer cancel()
	lb, err := b.Lead(lctx, "king")
	if err != nil {
		t.Fatalf("standby after the leader froze inside a fenced commit: %v, want the lead", err)
	}
	defer lb.Release()
	if lb.Epoch() != la.Epoch()+1 {
		t.Fatalf("epoch %d after %d", lb.Epoch(), la.Epoch())
	}
	if err := frozen.Commit(ctx); err == nil {
		t.Fatal("the frozen leader's fenced commit succeeded after a new epoch")
	}
}
