package pg

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// listenPair opens two handles on one fresh database: a writer and a
// listener whose Listen has connected (its first Wildcard is consumed).
func listenPair(t *testing.T) (w *Store, got <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dsn := pgtest.DB(t)
	w, err := Open(ctx, dsn, "host-w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	l, err := Open(ctx, dsn, "host-l")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got = l.Changes(ctx)
	if p := next(t, got); p != Wildcard {
		t.Fatalf("first payload %q, want %q once the session listens", p, Wildcard)
	}
	return w, got
}

// next returns the next payload, failing t when none comes in time (a
// deadline for a hung test, not a latency assertion).
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("listen channel closed")
		}
		return p
	case <-time.After(20 * time.Second):
		t.Fatal("no notification")
	}
	return ""
}

// collect reads payloads until mark arrives (the payload of the writer's
// last commit), returning those before it.
func collect(t *testing.T, ch <-chan string, mark string) []string {
	t.Helper()
	var out []string
	for {
		p := next(t, ch)
		if p == mark {
			return out
		}
		out = append(out, p)
	}
}

func mark(t *testing.T, w *Store, ns string) string {
	t.Helper()
	if err := w.Update(context.Background(), func(tx store.Tx) error { return tx.Set(ns, "k", []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	return "kv/" + ns
}

func TestListen_PayloadsNameWhatEachCommitChanged(t *testing.T) {
	ctx := context.Background()
	w, got := listenPair(t)
	doc := []byte(`{"priority":"high"}`)
	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{"put once", func() error {
			return w.Update(ctx, func(tx store.Tx) error { return tx.PutOnce("tasks", "pending", "task-1", doc) })
		}, []string{"tasks/pending"}},
		{"claim", func() error {
			return w.Claim(ctx, "tasks", "pending", "in_progress", "task-1", store.Claim{Holder: "host-w", Attempt: 1})
		}, []string{"tasks/in_progress"}},
		{"move and reject, each payload once", func() error {
			return w.Update(ctx, func(tx store.Tx) error {
				if err := tx.PutOnce("messages", "pending", "msg-1", doc); err != nil {
					return err
				}
				if err := tx.PutOnce("messages", "pending", "msg-2", doc); err != nil {
					return err
				}
				if err := tx.Move("messages", "pending", "sent", "msg-1"); err != nil {
					return err
				}
				return tx.Reject("messages", "pending", "msg-2", "bad")
			})
		}, []string{"messages/pending", "messages/sent", "messages/rejected"}},
		{"claim next", func() error {
			_, err := w.ClaimNext(ctx, "messages", "sent", "failed", store.Claim{Holder: "host-w", Attempt: 1})
			return err
		}, []string{"messages/failed"}},
		{"admit", func() error { return w.Admit(ctx, "evt-1", doc) }, []string{"events/pending"}},
		{"kv set and delete", func() error {
			return w.Update(ctx, func(tx store.Tx) error {
				if err := tx.Set("results", "task-1", []byte("{}")); err != nil {
					return err
				}
				return tx.Delete("control", "pause")
			})
		}, []string{"kv/results", "kv/control"}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		m := mark(t, w, "mark"+string(rune('a'+i)))
		if p := collect(t, got, m); !slices.Equal(p, st.want) {
			t.Errorf("%s: payloads %q, want %q", st.name, p, st.want)
		}
	}

	// A change that changes nothing announces nothing: a lost claim, a
	// duplicate admission.
	err := w.Claim(ctx, "tasks", "pending", "in_progress", "task-1", store.Claim{Holder: "host-w", Attempt: 2})
	if !errors.Is(err, store.ErrTaken) {
		t.Fatalf("second claim: %v", err)
	}
	if err := w.Admit(ctx, "evt-1", doc); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("second admission: %v", err)
	}
	if p := collect(t, got, mark(t, w, "markz")); len(p) != 0 {
		t.Errorf("no-op changes announced %q", p)
	}
}

func TestListen_RolledBackTransactionSendsNothing(t *testing.T) {
	ctx := context.Background()
	w, got := listenPair(t)
	boom := errors.New("boom")
	err := w.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutOnce("tasks", "pending", "task-1", []byte(`{}`)); err != nil {
			return err
		}
		if err := tx.Set("results", "task-1", []byte("{}")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v", err)
	}
	if p := collect(t, got, mark(t, w, "mark")); len(p) != 0 {
		t.Fatalf("a rolled-back transaction announced %q", p)
	}
}

func TestListen_ReconnectsAfterItsSessionIsKilledAndSaysStar(t *testing.T) {
	ctx := context.Background()
	w, got := listenPair(t)
	tag, err := w.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE '%/listen' AND datname=current_database()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the listen session: %v (%d sessions)", err, tag.RowsAffected())
	}
	if p := next(t, got); p != Wildcard {
		t.Fatalf("after the session died: %q, want %q", p, Wildcard)
	}
	if p := collect(t, got, mark(t, w, "after")); len(p) != 0 {
		t.Fatalf("before the mark: %q", p)
	}
}

func TestListen_ChannelClosesWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, pgtest.DB(t), "host-l")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Changes(ctx)
	if p := next(t, got); p != Wildcard {
		t.Fatalf("first payload %q", p)
	}
	cancel()
	for {
		select {
		case _, ok := <-got:
			if !ok {
				return
			}
		case <-time.After(20 * time.Second):
			t.Fatal("channel still open after the context ended")
		}
	}
}
