package queue_test

import (
	"fmt"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// BenchmarkQueue_PutClaimMove measures one full put → claim → move cycle of a
// small task file (three renames, two fsyncs of data, directory syncs).
func BenchmarkQueue_PutClaimMove(b *testing.B) {
	_, q := newTree(b)
	v := item{ID: "x", Priority: "normal", CreatedAt: "2026-11-21T10:00:00Z"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("task-20261121-%07d", i)
		if err := q.PutOnce(layout.Pending, id, v); err != nil {
			b.Fatal(err)
		}
		if err := q.Claim(layout.Pending, layout.InProgress, id); err != nil {
			b.Fatal(err)
		}
		if err := q.Move(layout.InProgress, layout.Completed, id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// BenchmarkQueue_List1000 lists and orders 1,000 pending files.
func BenchmarkQueue_List1000(b *testing.B) {
	_, q := newTree(b)
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("task-20261121-%04d", i)
		q.Put(layout.Pending, id, item{ID: id, Priority: []string{"high", "normal", "low"}[i%3], CreatedAt: "2026-11-21T10:00:00Z"})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		es, err := q.List(layout.Pending)
		if err != nil || len(es) != 1000 {
			b.Fatal(len(es), err)
		}
	}
}
