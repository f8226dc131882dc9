package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// env is one store under test.
type env struct {
	l     layout.Layout
	st    store.Store
	em    *eventlog.Emitter
	queue func(kind string) *queue.Queue
	// another opens a second handle on the same queues, as another
	// process (or host) would have: its own store connection or files.
	another func(kind, host string) *queue.Queue
}

// eachBackend runs fn on the files store and on PostgreSQL (which pgtest
// skips without its binaries, except under CI=true).
func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("store-files", func(t *testing.T) {
		l := layout.New(t.TempDir())
		open := func() store.Store {
			st, err := files.Open(l, "test-host")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		st := open()
		em := eventlog.NewStoreEmitter(st, "test")
		fn(t, &env{l: l, st: st, em: em,
			queue:   func(kind string) *queue.Queue { return queue.OnStore(st, l, kind, em, "host-a") },
			another: func(kind, host string) *queue.Queue { return queue.OnStore(open(), l, kind, nil, host) },
		})
	})
	t.Run("store-pg", func(t *testing.T) {
		dsn := pgtest.DB(t)
		l := layout.New(t.TempDir())
		open := func(host string) store.Store {
			st, err := pg.Open(context.Background(), dsn, host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		st := open("host-a")
		em := eventlog.NewStoreEmitter(st, "test")
		fn(t, &env{l: l, st: st, em: em,
			queue:   func(kind string) *queue.Queue { return queue.OnStore(st, l, kind, em, "host-a") },
			another: func(kind, host string) *queue.Queue { return queue.OnStore(open(host), l, kind, nil, host) },
		})
	})
}

func TestBackends_ClaimIsExclusive(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		const n, claimers = 200, 6
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("task-20261121-%03d", i)
			if err := q.PutOnce(layout.Pending, id, item{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		won := make([][]string, claimers)
		var wg sync.WaitGroup
		for c := 0; c < claimers; c++ {
			cq := e.another(layout.QTasks, fmt.Sprintf("host-%d", c))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					// Each claimer starts at a different place, so they collide.
					id := fmt.Sprintf("task-20261121-%03d", (i+c*n/claimers)%n)
					err := cq.Claim(layout.Pending, layout.InProgress, id)
					switch {
					case err == nil:
						won[c] = append(won[c], id)
					case !errors.Is(err, queue.ErrTaken):
						t.Errorf("claim %s: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		for _, w := range won {
			for _, id := range w {
				seen[id]++
			}
		}
		if len(seen) != n {
			t.Fatalf("claimed %d distinct ids, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("%s claimed %d times", id, c)
			}
		}
		if got := q.Count(layout.InProgress); got != n {
			t.Errorf("in_progress holds %d, want %d", got, n)
		}
		if got := q.Count(layout.Pending); got != 0 {
			t.Errorf("pending holds %d, want 0", got)
		}
	})
}

func TestBackends_ClaimLoserGetsErrTaken(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		q.PutOnce(layout.Pending, "task-1", item{ID: "task-1"})
		if err := q.Claim(layout.Pending, layout.InProgress, "task-1"); err != nil {
			t.Fatal(err)
		}
		if err := q.Claim(layout.Pending, layout.InProgress, "task-1"); !errors.Is(err, queue.ErrTaken) {
			t.Fatalf("second claim: got %v, want ErrTaken", err)
		}
		if !q.Exists(layout.InProgress, "task-1") || q.Exists(layout.Pending, "task-1") {
			t.Fatal("the winner's claim did not move the task")
		}
	})
}

func TestBackends_PutOnceRefusesIDInAnyState(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		for _, st := range []string{layout.Completed, layout.Rejected} {
			id := "task-in-" + st
			if err := q.PutOnce(st, id, item{ID: id}); err != nil {
				t.Fatal(err)
			}
			err := q.PutOnce(layout.Pending, id, item{ID: id})
			if !errors.Is(err, queue.ErrExists) || !errors.Is(err, store.ErrExists) {
				t.Fatalf("%s: got %v, want ErrExists", st, err)
			}
			if q.Exists(layout.Pending, id) {
				t.Fatalf("%s: pending copy was written", st)
			}
			if got, ok := q.Find(id); !ok || got != st {
				t.Fatalf("Find(%s) = %q, %v; want %s", id, got, ok, st)
			}
		}
	})
}

func TestBackends_ListOrdersByPriorityThenAgeThenID(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		put := func(id, prio string, minute int) {
			at := fmt.Sprintf("2026-11-21T10:%02d:00Z", minute)
			if err := q.PutOnce(layout.Pending, id, item{ID: id, Priority: prio, CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		put("task-20261121-007", "low", 0)
		put("task-20261121-006", "normal", 5)
		put("task-20261121-002", "high", 9)
		put("task-20261121-003", "normal", 1)
		put("task-20261121-001", "high", 2)
		put("task-20261121-005", "normal", 3)
		put("task-20261121-004", "normal", 3)
		es, err := q.List(layout.Pending)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			if !e.Checked || e.State != layout.Pending {
				t.Errorf("%s: Checked %v, State %q", e.ID, e.Checked, e.State)
			}
			got = append(got, e.ID)
		}
		want := "task-20261121-001,task-20261121-002,task-20261121-003,task-20261121-004,task-20261121-005,task-20261121-006,task-20261121-007"
		if strings.Join(got, ",") != want {
			t.Fatalf("order\n got %v\nwant %s", got, want)
		}
		idl, err := q.IDs(layout.Pending)
		if err != nil || len(idl) != 7 {
			t.Fatalf("IDs = %v, %v", idl, err)
		}
	})
}

// A document no consumer can take (here: schema-invalid, or its id not its
// name) is rejected with a reason the moment List or Count meets it, and the
// queue keeps flowing.
func TestBackends_PoisonIsRejectedAndQueueFlows(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		// Put writes what it is given: the poison gets in through it.
		if err := q.Put(layout.Pending, "task-20261121-901", []byte(`{"id":"task-20261121-901"}`)); err != nil {
			t.Fatal(err)
		}
		if err := q.Put(layout.Pending, "task-20261121-902", item{ID: "task-20261121-903"}); err != nil {
			t.Fatal(err)
		}
		q.PutOnce(layout.Pending, "task-20261121-100", item{ID: "task-20261121-100"})
		if got := q.Count(layout.Pending); got != 1 {
			t.Fatalf("Count = %d, want 1", got)
		}
		es, err := q.List(layout.Pending)
		if err != nil || len(es) != 1 || es[0].ID != "task-20261121-100" {
			t.Fatalf("List = %v, %v; want only the good task", es, err)
		}
		for id, word := range map[string]string{"task-20261121-901": "invalid", "task-20261121-902": "does not match"} {
			if !q.Exists(layout.Rejected, id) {
				t.Errorf("%s not rejected", id)
				continue
			}
			d, err := e.st.Get(context.Background(), layout.QTasks, id)
			if err != nil || !strings.Contains(d.Reason, word) {
				t.Errorf("%s: reason %q, %v; want it to mention %q", id, d.Reason, err, word)
			}
		}
		if got := q.Count(layout.Rejected); got != 2 {
			t.Errorf("Count(rejected) = %d, want 2", got)
		}
		if got := countEvents(t, e, "system.file_rejected"); got < 2 {
			t.Errorf("system.file_rejected events = %d, want 2", got)
		}
		if err := q.Claim(layout.Pending, layout.InProgress, "task-20261121-100"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBackends_UnsafeIDRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		for _, id := range []string{"../escape", "a/b", "", ".hidden", "a..b", strings.Repeat("x", 201), "sp ace"} {
			if err := q.PutOnce(layout.Pending, id, item{}); err == nil {
				t.Errorf("PutOnce(%q) accepted", id)
			}
			if err := q.Put(layout.Pending, id, item{}); err == nil {
				t.Errorf("Put(%q) accepted", id)
			}
			if err := q.Claim(layout.Pending, layout.InProgress, id); err == nil {
				t.Errorf("Claim(%q) accepted", id)
			}
		}
	})
}

// Move, Read, Remove and Reject keep file mode's contract on every backend:
// a missing source is fs.ErrNotExist, a missing removal is no error.
func TestBackends_MoveReadRemoveReject(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		id := "task-20261121-001"
		if err := q.Move(layout.Pending, layout.Completed, id); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("move of nothing: %v, want fs.ErrNotExist", err)
		}
		q.PutOnce(layout.Pending, id, item{ID: id, Priority: "high"})
		var got doc.Task
		if err := q.ReadJSON(layout.Pending, id, &got); err != nil || got.ID != id || got.Priority != "high" {
			t.Fatalf("ReadJSON = %+v, %v", got, err)
		}
		if _, err := q.Read(layout.InProgress, id); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("read from the wrong state: %v, want fs.ErrNotExist", err)
		}
		if err := q.Move(layout.Pending, layout.Completed, id); err != nil {
			t.Fatal(err)
		}
		if s, _ := q.Find(id); s != layout.Completed {
			t.Fatalf("after move: in %q", s)
		}
		if err := q.Remove(layout.Pending, id); err != nil {
			t.Fatalf("remove from a state it is not in: %v", err)
		}
		if !q.Exists(layout.Completed, id) {
			t.Fatal("a removal from another state removed it")
		}
		if err := q.Reject(layout.Completed, id, "test reason"); err != nil {
			t.Fatal(err)
		}
		if !q.Exists(layout.Rejected, id) {
			t.Fatal("not rejected")
		}
		if err := q.Reject(layout.Completed, id, "again"); err != nil {
			t.Fatalf("reject of one already gone: %v", err)
		}
		if err := q.Remove(layout.Rejected, id); err != nil {
			t.Fatal(err)
		}
		if _, ok := q.Find(id); ok {
			t.Fatal("still there after Remove")
		}
	})
}

// FinishAs moves a claimed document on only for the host and attempt that
// claimed it (SPEC §11.7: a result is accepted only from its holder).
func TestBackends_FinishAsIsFencedByHostAndAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		q := e.queue(layout.QTasks)
		id := "task-20261121-001"
		q.PutOnce(layout.Pending, id, item{ID: id})
		holder := store.Claim{Holder: "host-a", Attempt: 1}
		if err := q.ClaimAs(layout.Pending, layout.InProgress, id, holder); err != nil {
			t.Fatal(err)
		}
		if err := q.ClaimAs(layout.Pending, layout.InProgress, id, store.Claim{Holder: "host-b", Attempt: 1}); !errors.Is(err, queue.ErrTaken) {
			t.Fatalf("second ClaimAs: %v, want ErrTaken", err)
		}
		for _, c := range []store.Claim{{Holder: "host-b", Attempt: 1}, {Holder: "host-a", Attempt: 2}} {
			err := q.FinishAs(layout.InProgress, layout.Completed, id, c)
			if !errors.Is(err, store.ErrFenced) {
				t.Fatalf("FinishAs by %+v: %v, want ErrFenced", c, err)
			}
			if !q.Exists(layout.InProgress, id) {
				t.Fatalf("FinishAs by %+v moved the task", c)
			}
		}
		if err := q.FinishAs(layout.InProgress, layout.Completed, id, holder); err != nil {
			t.Fatal(err)
		}
		if !q.Exists(layout.Completed, id) {
			t.Fatal("the holder's FinishAs did not move the task")
		}
		if err := q.FinishAs(layout.InProgress, layout.Completed, id, holder); err == nil {
			t.Fatal("a second FinishAs succeeded")
		}
	})
}

// countEvents counts the internal events of type typ written so far.
func countEvents(t *testing.T, e *env, typ string) int {
	t.Helper()
	evs, err := e.st.Events(t.Context(), "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// Every entry List returns outside rejected/ passed CheckDocument, and says
// so (Checked), so a consumer need not validate it again.
func TestBackends_ListedEntriesAreChecked(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		events := e.queue(layout.QEvents)
		ev := map[string]any{"id": "evt-1", "type": "github.pr.opened", "source": "github", "repo": nil, "payload": map[string]any{},
			"priority": "normal", "created_at": "2026-11-21T10:00:00Z", "status": "pending"}
		if err := events.Put(layout.Pending, "evt-1", ev); err != nil {
			t.Fatal(err)
		}
		if err := events.Put(layout.Pending, "evt-2", map[string]any{"id": "evt-2"}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second List knows evt-1 from its cache
			es, err := events.List(layout.Pending)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 || es[0].ID != "evt-1" || !es[0].Checked {
				t.Fatalf("entries %+v, want evt-1 checked (evt-2 rejected)", es)
			}
		}
		rej, _ := events.List(layout.Rejected)
		for _, e := range rej {
			if e.Checked {
				t.Errorf("rejected %s marked checked", e.ID)
			}
		}
	})
}
