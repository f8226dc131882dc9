package king

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// BenchmarkKing_DeferredTick (issue #17's scaling series): n events wait in
// pending/ while max_soldiers is full, so every one is deferred. Each
// iteration one more event arrives and the king ticks. Reports the tick's
// CPU time and that time per pending event: with deferrals remembered the
// tick must not grow like the backlog.
func BenchmarkKing_DeferredTick(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l := layout.New(benchTempDir(b))
			if err := l.Ensure(); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(l.GeneralManifest("gen-pr"), []byte(genPR), 0o600)
			cfg := config.DefaultKing()
			cfg.Concurrency.MaxSoldiers = 1
			k, err := New(Options{Layout: l, Config: cfg, Location: time.UTC, CrashAt: "-"})
			if err != nil {
				b.Fatal(err)
			}
			// The one slot is taken by a task in progress.
			busy := &schema.Task{ID: "task-20261121-900", EventID: "evt-busy", TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
				Payload: map[string]any{}, Priority: "normal", CreatedAt: "2026-11-21T10:00:00Z", Status: "in_progress"}
			if err := k.tasks.Put(layout.InProgress, busy.ID, busy); err != nil {
				b.Fatal(err)
			}
			benchEvents(b, l, 0, n)
			if err := k.Tick(context.Background()); err != nil { // the first walk defers them all
				b.Fatal(err)
			}
			var cpu time.Duration
			i := n
			for b.Loop() {
				b.StopTimer()
				benchEvents(b, l, i, 1)
				i++
				b.StartTimer()
				c := proctree.SelfCPU()
				if err := k.Tick(context.Background()); err != nil {
					b.Fatal(err)
				}
				cpu += proctree.SelfCPU() - c
			}
			if got := k.events.Count(layout.Pending); got != i {
				b.Fatalf("pending = %d, want %d (all deferred)", got, i)
			}
			per := cpu / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds())/1000, "tick-cpu-ms")
			b.ReportMetric(float64(per.Nanoseconds())/1000/float64(n), "cpu-µs/pending-event")
		})
	}
}
