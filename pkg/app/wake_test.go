package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func TestWakesRole_EachRoleHearsItsWork(t *testing.T) {
	all := []string{"events/pending", "events/petitioning", "events/dispatched", "kv/results", "kv/control",
		"tasks/pending", "tasks/in_progress", "tasks/completed", "kv/cancelled", "kv/pauses",
		"messages/pending", "messages/sent", "kv/spend", "*"}
	want := map[string][]string{
		layout.RoleKing:        {"events/pending", "events/petitioning", "kv/results", "kv/control", "tasks/pending", "tasks/in_progress", "*"},
		"gen-work":             {"tasks/pending", "kv/cancelled", "kv/pauses", "*"},
		layout.RoleEnvoy:       {"messages/pending", "*"},
		layout.RoleSentinel:    nil,
		layout.RoleChamberlain: nil,
		"general":              nil, // not a general's name
	}
	for role, yes := range want {
		for _, p := range all {
			w := false
			for _, y := range yes {
				w = w || y == p
			}
			if got := wakesRole(role, p); got != w {
				t.Errorf("wakesRole(%q, %q) = %v, want %v", role, p, got, w)
			}
		}
	}
}

func TestRunnerOptions_PostgresWakesTheRoleOnItsNotifications(t *testing.T) {
	dsn := pgtest.DB(t)
	t.Setenv("KINGDOM_TEST_DSN", dsn)
	os.Unsetenv(config.HostIDEnv)
	ctx := context.Background()
	base := pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base
	king, err := setupWithStore(layout.RoleKing, base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer king.Close()
	sentinel, err := setupWithStore(layout.RoleSentinel, base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer sentinel.Close()
	if o := sentinel.RunnerOptions(&cli.Command{}); o.Wakes != nil {
		t.Fatal("the sentinel got store wakes (its inbox is local)")
	}
	wakes := king.RunnerOptions(&cli.Command{}).Wakes
	if wakes == nil {
		t.Fatal("postgres mode: the king has no store wakes")
	}
	// The listener's first wake ("*") says it listens; commits after it
	// are heard.
	recv(t, wakes, "the listener's first wake")
	put := func(q, state, id string) {
		t.Helper()
		if err := sentinel.Store.Update(ctx, func(tx store.Tx) error { return tx.PutOnce(q, state, id, []byte(`{}`)) }); err != nil {
			t.Fatal(err)
		}
	}
	put("messages", "pending", "msg-1") // the envoy's, not the king's
	put("events", "pending", "evt-1")
	recv(t, wakes, "a wake for events/pending")
	select {
	case <-wakes:
		t.Fatal("a second wake: the king heard messages/pending")
	case <-time.After(300 * time.Millisecond): // negative check: a notification arrives in milliseconds
	}

	// Closing the store ends the listener and its session.
	king.Close()
	pool, err := testPool(ctx, sentinel.Store)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name='kingdom-listen' AND datname=current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listen sessions left after the store closed", n)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's view
	}
}

// fakeListener is an opened store that only announces.
type fakeListener struct {
	store.Store
	ch chan string
}

func (f *fakeListener) Changes(context.Context) <-chan string { return f.ch }
func (f *fakeListener) Close() error                          { return nil }

func TestRunnerOptions_ListenerRetriesAStoreThatCannotOpenYet(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", "postgres://127.0.0.1:1/none")
	env, err := SetupWith("gen-work", pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	fake := &fakeListener{ch: make(chan string, 1)}
	var tries atomic.Int32
	env.SetStoreOpener(func(context.Context, config.Store, layout.Layout) (store.Store, error) {
		if tries.Add(1) == 1 {
			return nil, errors.New("database down")
		}
		return fake, nil
	})
	wakes := env.RunnerOptions(&cli.Command{}).Wakes // must not wait for the store
	fake.ch <- "tasks/pending"
	recv(t, wakes, "a wake once the store opened on the second try")
	if n := tries.Load(); n != 2 {
		t.Fatalf("opened after %d tries, want 2", n)
	}
}

func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// A role's OpenStore waits out a store that cannot be reached (a database
// that is down at boot) instead of failing, and fails at once for any
// other error.
func TestOpenStore_WaitsForAnUnreachableStore(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", "postgres://127.0.0.1:1/none")
	env, err := SetupWith("king", pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	fake := &fakeListener{ch: make(chan string, 1)}
	var tries atomic.Int32
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	var recorded atomic.Bool
	env.SetStoreOpener(func(context.Context, config.Store, layout.Layout) (store.Store, error) {
		n := tries.Add(1)
		if n == 2 {
			// While it waits, the verdict can name the cause.
			if b, err := os.ReadFile(env.Layout.StoreUnreachable("king")); err == nil && strings.Contains(string(b), "connection refused") {
				recorded.Store(true)
			}
		}
		if n <= 2 {
			return nil, fmt.Errorf("open postgres store: %w", down)
		}
		return fake, nil
	})
	st, err := OpenStore(t.Context(), env.Store)
	if err != nil || st != fake || tries.Load() != 3 {
		t.Fatalf("OpenStore = %v, %v after %d tries; want the store on the third", st, err, tries.Load())
	}
	if !recorded.Load() {
		t.Error("no outage record while OpenStore waited")
	}
	if _, err := os.Stat(env.Layout.StoreUnreachable("king")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("outage record left after the store opened: %v", err)
	}

	env2, err := SetupWith("king", pgTree(t, "KINGDOM_TEST_DSN", "box-a").Base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer env2.Close()
	var tries2 atomic.Int32
	env2.SetStoreOpener(func(context.Context, config.Store, layout.Layout) (store.Store, error) {
		tries2.Add(1)
		return nil, errors.New("open postgres store: the DSN does not parse")
	})
	if _, err := OpenStore(t.Context(), env2.Store); err == nil || tries2.Load() != 1 {
		t.Fatalf("a config error: %v after %d tries, want an error at once", err, tries2.Load())
	}
}
