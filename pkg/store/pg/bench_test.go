package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func benchStore(b *testing.B) *Store {
	st, err := Open(context.Background(), pgtest.DB(b), "host-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkClaim4: four claimers drain pending with ClaimNext (SKIP
// LOCKED); reports claims/s and fails on a duplicate claim.
func BenchmarkClaim4(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	now := time.Now()
	for i := range b.N {
		id := fmt.Sprintf("task-20260101-%06d", i)
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.PutOnce(layout.QTasks, layout.Pending, id, storetest.Doc(layout.QTasks, id, "normal", now))
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var claimed atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, err := st.ClaimNext(ctx, layout.QTasks, layout.Pending, layout.InProgress, store.Claim{Holder: fmt.Sprint("w", w)})
				if errors.Is(err, store.ErrNotFound) {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if seen[d.ID] {
					b.Errorf("%s claimed twice", d.ID)
				}
				seen[d.ID] = true
				mu.Unlock()
				claimed.Add(1)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if int(claimed.Load()) != b.N {
		b.Fatalf("claimed %d of %d", claimed.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkDispatch: one dispatch per transaction, as the king does it
// (event pending → dispatched, put-once task, put-once thread_start,
// sequence, event-log row).
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	now := time.Now()
	for i := range b.N {
		id := fmt.Sprintf("evt-%d", i)
		if err := st.Admit(ctx, id, storetest.Doc(layout.QEvents, id, "normal", now)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		ev, task := fmt.Sprintf("evt-%d", i), fmt.Sprintf("task-20260101-%06d", i)
		err := st.Update(ctx, func(tx store.Tx) error {
			if err := tx.Move(layout.QEvents, layout.Pending, layout.Dispatched, ev); err != nil {
				return err
			}
			if err := tx.Set(store.NSSequences, "task-seq", []byte(fmt.Sprint("20260101:", i))); err != nil {
				return err
			}
			if err := tx.PutOnce(layout.QTasks, layout.Pending, task, storetest.Doc(layout.QTasks, task, "normal", now)); err != nil {
				return err
			}
			msg := "msg-" + task + "-start"
			if err := tx.PutOnce(layout.QMessages, layout.Pending, msg, storetest.Doc(layout.QMessages, msg, "normal", now)); err != nil {
				return err
			}
			return tx.Emit("task.created", "king", map[string]string{"task_id": task})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dispatches/s")
}

// BenchmarkLimit_SmallestWrite: the cheapest write transaction through
// the store on the same server (one key-value row set): the limit a
// dispatch (five writes in one transaction) and a claim are read beside.
func BenchmarkLimit_SmallestWrite(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	v := []byte(`{"n":1}`)
	b.ResetTimer()
	for i := range b.N {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.Set("bench", fmt.Sprint("k", i%64), v)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}
