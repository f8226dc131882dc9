package queue

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// BenchmarkClaimRewrite measures a general's claim rewrite: a task file in
// in_progress/ rewritten with its new status, as a plain Put (a new temp
// per rewrite, the old inode freed), and through spares (Put, and Rewrite,
// which tries the exchange first). The pool's clock moves 100 ms per
// rewrite (a general claiming ten tasks a second), so a replaced inode has
// rested its second ten rewrites later. Reports the process's CPU per
// rewrite.
func BenchmarkClaimRewrite(b *testing.B) {
	for _, mode := range []string{"plain", "spares-put", "spares-rewrite"} {
		b.Run(mode, func(b *testing.B) {
			l := layout.New(b.TempDir())
			if err := l.Ensure(); err != nil {
				b.Fatal(err)
			}
			q := New(l, layout.QTasks, nil)
			if mode != "plain" {
				sp, err := NewSpares(filepath.Join(l.Base, "state", "spare"), l.QueueState(layout.QTasks, layout.Pending))
				if err != nil {
					b.Fatal(err)
				}
				var tick time.Duration
				t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
				sp.now = func() time.Time { return t0.Add(tick) }
				q.UseSpares(sp, MinSpareAge)
				put := q.Put
				if mode == "spares-rewrite" {
					put = q.Rewrite
				}
				run(b, q, put, func() { tick += 100 * time.Millisecond })
				return
			}
			run(b, q, q.Put, func() {})
		})
	}
}

func run(b *testing.B, q *Queue, put func(state, id string, v any) error, step func()) {
	const files = 64
	doc := func(id string, n int) map[string]any {
		return map[string]any{"id": id, "status": "in_progress", "target_general": "gen-pr", "n": n,
			"prompt": "a task of about the size of a real one, with some text in it"}
	}
	for i := range files {
		id := fmt.Sprintf("task-20261121-%03d", i)
		if err := q.Put(layout.InProgress, id, doc(id, 0)); err != nil {
			b.Fatal(err)
		}
	}
	var cpu time.Duration
	n := 0
	for b.Loop() {
		id := fmt.Sprintf("task-20261121-%03d", n%files)
		c := proctree.SelfCPU()
		if err := put(layout.InProgress, id, doc(id, n)); err != nil {
			b.Fatal(err)
		}
		cpu += proctree.SelfCPU() - c
		step()
		n++
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/rewrite")
}
