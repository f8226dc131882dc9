// Package storetest is the conformance suite of the store seam: every
// store.Store implementation runs Run, and the same assertions hold for
// each. A store is named by a location string (a base dir, a DSN) so the
// suite can open it again from a child process: the crash test re-executes
// the test binary, which must call Child first thing in TestMain.
//
//	func TestMain(m *testing.M) { storetest.Child(open); os.Exit(m.Run()) }
//	func TestConformance(t *testing.T) { storetest.Run(t, newLoc, open) }
package storetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Opener opens the store at a location.
type Opener func(loc string) (store.Store, error)

const childEnv = "KINGDOM_STORETEST_CHILD"

// Child runs the crash test's writer when this process is its child, and
// never returns then.
func Child(open Opener) {
	loc := os.Getenv(childEnv)
	if loc == "" {
		return
	}
	st, err := open(loc)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		err := st.Update(ctx, func(tx store.Tx) error { return crashTx(tx, i) })
		if errors.Is(err, store.ErrExists) {
			continue // committed by an earlier round
		}
		if err != nil {
			fmt.Println("update:", err)
			os.Exit(2)
		}
		fmt.Println(i) // the parent counts these to kill mid-stream
	}
}

// crashTx is transaction i of the crash test: three documents in three
// queues, a key and an event, all or nothing.
func crashTx(tx store.Tx, i int) error {
	id := fmt.Sprintf("task-20260101-%03d", i)
	for _, q := range []string{layout.QEvents, layout.QTasks, layout.QMessages} {
		if err := tx.PutOnce(q, layout.Pending, id, Doc(q, id, "normal", time.Unix(int64(i), 0))); err != nil {
			return err
		}
	}
	if err := tx.Set(store.NSSequences, id, []byte(strconv.Itoa(i))); err != nil {
		return err
	}
	return tx.Emit("test.crash", "storetest", map[string]any{"id": id})
}

// Doc returns a schema-valid document of queue q (the file store rejects
// anything else as poison).
func Doc(q, id, priority string, created time.Time) []byte {
	at := created.UTC().Format(time.RFC3339Nano)
	var d map[string]any
	switch q {
	case layout.QEvents:
		d = map[string]any{"id": id, "type": "test.event", "source": "inbox", "repo": nil, "payload": map[string]any{},
			"priority": priority, "created_at": at, "status": "pending"}
	case layout.QTasks:
		d = map[string]any{"id": id, "event_id": "evt-" + id, "target_general": "gen-test", "type": "test", "repo": nil,
			"payload": map[string]any{}, "priority": priority, "created_at": at, "status": "pending", "retry_count": 0}
	default:
		d = map[string]any{"id": id, "type": "notification", "task_id": nil, "urgency": "normal", "content": "x",
			"context": map[string]any{}, "source_ref": nil, "created_at": at, "status": "pending", "priority": priority}
	}
	b, _ := json.Marshal(d)
	return b
}

// Run runs the suite; newLoc makes a fresh, empty store location for a test.
func Run(t *testing.T, newLoc func(t *testing.T) string, open Opener) {
	ctx := context.Background()
	fresh := func(t *testing.T) (store.Store, string) {
		loc := newLoc(t)
		st, err := open(loc)
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st, loc
	}
	put := func(t *testing.T, st store.Store, q, state, id string, data []byte) error {
		return st.Update(ctx, func(tx store.Tx) error { return tx.PutOnce(q, state, id, data) })
	}

	t.Run("PutOnceRefusesDuplicateInAnyState", func(t *testing.T) {
		st, _ := fresh(t)
		now := time.Now()
		if err := put(t, st, layout.QTasks, layout.Pending, "task-20260101-001", Doc(layout.QTasks, "task-20260101-001", "normal", now)); err != nil {
			t.Fatal(err)
		}
		for _, state := range layout.QueueStates[layout.QTasks] {
			if err := put(t, st, layout.QTasks, state, "task-20260101-001", Doc(layout.QTasks, "task-20260101-001", "high", now)); !errors.Is(err, store.ErrExists) {
				t.Fatalf("put-once into %s while pending: got %v, want ErrExists", state, err)
			}
		}
		must(t, st.Update(ctx, func(tx store.Tx) error { return tx.Reject(layout.QTasks, layout.Pending, "task-20260101-001", "bad") }))
		if err := put(t, st, layout.QTasks, layout.Pending, "task-20260101-001", Doc(layout.QTasks, "task-20260101-001", "high", now)); !errors.Is(err, store.ErrExists) {
			t.Fatalf("put-once after reject: got %v, want ErrExists", err)
		}
		d, err := st.Get(ctx, layout.QTasks, "task-20260101-001")
		must(t, err)
		if d.Priority != "normal" || d.State != layout.Rejected {
			t.Fatalf("duplicate changed the document: %+v", d)
		}
		if err := put(t, st, layout.QTasks, layout.Pending, "../x", Doc(layout.QTasks, "x", "high", now)); err == nil {
			t.Fatal("unsafe id accepted")
		}
	})

	t.Run("ClaimHasExactlyOneWinner", func(t *testing.T) {
		st, loc := fresh(t)
		const n = 20
		for i := range n {
			must(t, put(t, st, layout.QTasks, layout.Pending, fmt.Sprintf("task-20260101-%03d", i), Doc(layout.QTasks, fmt.Sprintf("task-20260101-%03d", i), "normal", time.Now())))
		}
		// Four claimants of the same store plus four of a second handle.
		st2, err := open(loc)
		must(t, err)
		defer st2.Close()
		var mu sync.Mutex
		wins := map[string]int{}
		var wg sync.WaitGroup
		for w := range 8 {
			s := st
			if w%2 == 1 {
				s = st2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n {
					id := fmt.Sprintf("task-20260101-%03d", i)
					err := s.Claim(ctx, layout.QTasks, layout.Pending, layout.InProgress, id, store.Claim{Holder: "h" + strconv.Itoa(w), Attempt: 0})
					switch {
					case err == nil:
						mu.Lock()
						wins[id]++
						mu.Unlock()
					case !errors.Is(err, store.ErrTaken):
						t.Errorf("claim %s: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if id := fmt.Sprintf("task-20260101-%03d", i); wins[id] != 1 {
				t.Fatalf("%s claimed %d times, want 1", id, wins[id])
			}
		}
	})

	t.Run("FinishOnlyForTheHolder", func(t *testing.T) {
		st, _ := fresh(t)
		must(t, put(t, st, layout.QTasks, layout.Pending, "task-20260101-001", Doc(layout.QTasks, "task-20260101-001", "normal", time.Now())))
		c := store.Claim{Holder: "host-a", Attempt: 2}
		must(t, st.Claim(ctx, layout.QTasks, layout.Pending, layout.InProgress, "task-20260101-001", c))
		d, err := st.Get(ctx, layout.QTasks, "task-20260101-001")
		must(t, err)
		if d.Claim != c {
			t.Fatalf("claim recorded %+v, want %+v", d.Claim, c)
		}
		for _, bad := range []store.Claim{{Holder: "host-b", Attempt: 2}, {Holder: "host-a", Attempt: 1}} {
			err := st.Update(ctx, func(tx store.Tx) error {
				return tx.Finish(layout.QTasks, layout.InProgress, layout.Completed, "task-20260101-001", bad)
			})
			if !errors.Is(err, store.ErrFenced) {
				t.Fatalf("finish as %+v: got %v, want ErrFenced", bad, err)
			}
		}
		must(t, st.Update(ctx, func(tx store.Tx) error {
			return tx.Finish(layout.QTasks, layout.InProgress, layout.Completed, "task-20260101-001", c)
		}))
		if d, _ := st.Get(ctx, layout.QTasks, "task-20260101-001"); d.State != layout.Completed {
			t.Fatalf("state %s, want completed", d.State)
		}
	})

	t.Run("ListOrderPriorityCreatedID", func(t *testing.T) {
		st, _ := fresh(t)
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		in := []struct {
			id, prio string
			at       time.Time
		}{
			{"e-low", "low", t0},
			{"e-b", "normal", t0.Add(time.Second)},
			{"e-a", "normal", t0.Add(time.Second)},
			{"e-old", "normal", t0},
			{"e-high", "high", t0.Add(time.Hour)},
		}
		for _, e := range in {
			must(t, put(t, st, layout.QEvents, layout.Pending, e.id, Doc(layout.QEvents, e.id, e.prio, e.at)))
		}
		docs, err := st.List(ctx, layout.QEvents, layout.Pending)
		must(t, err)
		var got []string
		for _, d := range docs {
			got = append(got, d.ID)
		}
		want := []string{"e-high", "e-old", "e-a", "e-b", "e-low"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list order %v, want %v", got, want)
		}
		d, err := st.ClaimNext(ctx, layout.QEvents, layout.Pending, layout.Dispatched, store.Claim{Holder: "h"})
		must(t, err)
		if d.ID != "e-high" {
			t.Fatalf("claim next took %s, want e-high", d.ID)
		}
	})

	t.Run("RejectKeepsReason", func(t *testing.T) {
		st, _ := fresh(t)
		must(t, put(t, st, layout.QMessages, layout.Pending, "m-1", Doc(layout.QMessages, "m-1", "normal", time.Now())))
		must(t, st.Update(ctx, func(tx store.Tx) error {
			return tx.Reject(layout.QMessages, layout.Pending, "m-1", "schema: channel missing")
		}))
		docs, err := st.List(ctx, layout.QMessages, layout.Rejected)
		must(t, err)
		if len(docs) != 1 || docs[0].Reason != "schema: channel missing" {
			t.Fatalf("rejected = %+v, want m-1 with its reason", docs)
		}
		if p, _ := st.List(ctx, layout.QMessages, layout.Pending); len(p) != 0 {
			t.Fatalf("pending still holds %d documents", len(p))
		}
	})

	t.Run("TransactionRollsBackOnError", func(t *testing.T) {
		st, _ := fresh(t)
		boom := errors.New("boom")
		err := st.Update(ctx, func(tx store.Tx) error {
			must(t, tx.PutOnce(layout.QTasks, layout.Pending, "task-20260101-001", Doc(layout.QTasks, "task-20260101-001", "normal", time.Now())))
			must(t, tx.Set(store.NSSequences, "task-seq", []byte("20260101:1")))
			must(t, tx.Emit("task.created", "king", nil))
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("update: %v", err)
		}
		if _, err := st.Get(ctx, layout.QTasks, "task-20260101-001"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("rolled-back document: %v", err)
		}
		if _, err := st.Value(ctx, store.NSSequences, "task-seq"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("rolled-back key: %v", err)
		}
		if evs, _ := st.Events(ctx, "", 10); len(evs) != 0 {
			t.Fatalf("rolled-back event delivered: %+v", evs)
		}
		// The transaction sees its own writes.
		must(t, st.Update(ctx, func(tx store.Tx) error {
			must(t, tx.PutOnce(layout.QTasks, layout.Pending, "task-20260101-002", Doc(layout.QTasks, "task-20260101-002", "normal", time.Now())))
			must(t, tx.Move(layout.QTasks, layout.Pending, layout.InProgress, "task-20260101-002"))
			must(t, tx.Set(store.NSSequences, "k", []byte("1")))
			v, err := tx.Value(store.NSSequences, "k")
			if err != nil || string(v) != "1" {
				t.Errorf("own write: %q %v", v, err)
			}
			return nil
		}))
		if d, _ := st.Get(ctx, layout.QTasks, "task-20260101-002"); d.State != layout.InProgress {
			t.Fatalf("state %q, want in_progress", d.State)
		}
		vals, err := st.Values(ctx, store.NSSequences)
		must(t, err)
		if string(vals["k"]) != "1" || len(vals) != 1 {
			t.Fatalf("values %v", vals)
		}
	})

	t.Run("AdmitOncePerID", func(t *testing.T) {
		st, _ := fresh(t)
		ev := Doc(layout.QEvents, "evt-1", "normal", time.Now())
		must(t, st.Admit(ctx, "evt-1", ev))
		if err := st.Admit(ctx, "evt-1", ev); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("second admit: %v, want ErrDuplicate", err)
		}
		// Gone from the queue, still seen.
		must(t, st.Update(ctx, func(tx store.Tx) error { return tx.Remove(layout.QEvents, layout.Pending, "evt-1") }))
		if err := st.Admit(ctx, "evt-1", ev); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("admit after the file left: %v, want ErrDuplicate", err)
		}
	})

	t.Run("EventsResumeWithoutSkipOrRepeat", func(t *testing.T) {
		st, _ := fresh(t)
		for i := range 5 {
			must(t, st.Update(ctx, func(tx store.Tx) error { return tx.Emit("test.n", "a", map[string]int{"n": i}) }))
		}
		var got []int
		var cur store.Cursor
		for range 10 {
			evs, err := st.Events(ctx, cur, 2)
			must(t, err)
			for _, e := range evs {
				var d struct{ N int }
				must(t, json.Unmarshal(e.Data, &d))
				got = append(got, d.N)
				cur = e.Cursor
			}
		}
		if fmt.Sprint(got) != "[0 1 2 3 4]" {
			t.Fatalf("events %v, want [0 1 2 3 4]", got)
		}
		// Resuming from the middle cursor of a batch.
		evs, err := st.Events(ctx, "", 5)
		must(t, err)
		rest, err := st.Events(ctx, evs[2].Cursor, 5)
		must(t, err)
		if len(rest) != 2 {
			t.Fatalf("after the third event %d remain, want 2", len(rest))
		}
	})

	t.Run("LeadershipIsExclusiveAndFenced", func(t *testing.T) {
		st, loc := fresh(t)
		a, err := st.Lead(ctx, "king")
		must(t, err)
		st2, err := open(loc)
		must(t, err)
		defer st2.Close()
		if _, err := st2.Lead(ctx, "king"); !errors.Is(err, store.ErrHeld) {
			t.Fatalf("second leader: %v, want ErrHeld", err)
		}
		must(t, st.Update(ctx, func(tx store.Tx) error {
			tx.Fence(a)
			return tx.Set(store.NSPauses, "g", []byte("x"))
		}))
		must(t, a.Release())
		select {
		case <-a.Lost():
		default:
			t.Fatal("released lease not reported lost")
		}
		b, err := st2.Lead(ctx, "king")
		must(t, err)
		defer b.Release()
		if b.Epoch() <= a.Epoch() {
			t.Fatalf("epoch %d after %d, want greater", b.Epoch(), a.Epoch())
		}
		err = st.Update(ctx, func(tx store.Tx) error {
			tx.Fence(a)
			return tx.Set(store.NSPauses, "g", []byte("stale"))
		})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed leader's write: %v, want ErrFenced", err)
		}
		if v, _ := st.Value(ctx, store.NSPauses, "g"); string(v) != "x" {
			t.Fatalf("value %q after a fenced write", v)
		}
	})

	t.Run("TransactionAllOrNothingUnderSIGKILL", func(t *testing.T) {
		_, loc := fresh(t)
		for round := range 8 {
			crashChild(t, loc, 3+round)
		}
		st, err := open(loc)
		must(t, err)
		defer st.Close()
		evs, err := st.Events(ctx, "", 100000)
		must(t, err)
		emitted := map[string]bool{}
		for _, e := range evs {
			var d struct{ ID string }
			json.Unmarshal(e.Data, &d)
			emitted[d.ID] = true
		}
		docs, err := st.List(ctx, layout.QEvents, layout.Pending)
		must(t, err)
		if len(docs) == 0 {
			t.Fatal("the child committed nothing")
		}
		for _, d := range docs {
			for _, q := range []string{layout.QTasks, layout.QMessages} {
				if _, err := st.Get(ctx, q, d.ID); err != nil {
					t.Fatalf("%s: events doc without its %s doc: %v", d.ID, q, err)
				}
			}
			if _, err := st.Value(ctx, store.NSSequences, d.ID); err != nil {
				t.Fatalf("%s: doc without its key: %v", d.ID, err)
			}
			if !emitted[d.ID] {
				t.Fatalf("%s: doc without its event", d.ID)
			}
		}
		for _, q := range []string{layout.QTasks, layout.QMessages} {
			other, _ := st.List(ctx, q, layout.Pending)
			if len(other) != len(docs) {
				t.Fatalf("%d %s docs but %d events docs: a transaction is partial", len(other), q, len(docs))
			}
		}
		vals, _ := st.Values(ctx, store.NSSequences)
		if len(vals) != len(docs) {
			t.Fatalf("%d keys but %d docs: a transaction is partial", len(vals), len(docs))
		}
		if len(emitted) != len(docs) {
			t.Fatalf("%d distinct events but %d docs", len(emitted), len(docs))
		}
	})
}

// crashChild runs the writer in a child process and SIGKILLs it after it
// reported n commits, while it is in the middle of more. Each round
// continues after what the last one left (PutOnce of an id it already
// has fails, so the child starts at the next free index).
func crashChild(t *testing.T, loc string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+loc)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	seen := 0
	for seen < n && sc.Scan() {
		if _, err := strconv.Atoi(sc.Text()); err != nil {
			t.Fatalf("child: %s", sc.Text())
		}
		seen++
	}
	// Killed at once, the child is always still in its next transaction's
	// first fsync; a random pause of up to 20 ms lands the kill anywhere in
	// a commit (the sleep sets where the kill falls, nothing is timed).
	time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if seen == 0 {
		t.Logf("child committed nothing new this round")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
