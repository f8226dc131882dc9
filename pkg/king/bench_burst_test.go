package king

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// BenchmarkKing_Burst is the king's share of the e2e burst (TestSpeedBench)
// alone: n events arrive at once, max_soldiers is 8, and a stand-in for the
// generals claims every task the king writes and answers it with a final
// result at once; the king ticks until every task completed. Reports the
// king's CPU (its ticks only, not the stand-in's) per task.
func BenchmarkKing_Burst(b *testing.B) {
	const n, slots = 200, 8
	var cpu time.Duration
	tasks := 0
	for b.Loop() {
		b.StopTimer()
		l := layout.New(b.TempDir())
		if err := l.Ensure(); err != nil {
			b.Fatal(err)
		}
		os.WriteFile(l.GeneralManifest("gen-pr"), []byte(genPR), 0o600)
		cfg := config.DefaultKing()
		cfg.Concurrency.MaxSoldiers = slots
		k, err := New(Options{Layout: l, Store: openStore(b, l), Host: "test-host", Config: cfg, Location: time.UTC})
		if err != nil {
			b.Fatal(err)
		}
		benchEvents(b, l, 0, n)
		pend, inprog := l.QueueState(layout.QTasks, layout.Pending), l.QueueState(layout.QTasks, layout.InProgress)
		for done := 0; done < n; {
			b.StartTimer()
			c := proctree.SelfCPU()
			if err := k.Tick(context.Background()); err != nil {
				b.Fatal(err)
			}
			cpu += proctree.SelfCPU() - c
			b.StopTimer()
			done = len(mustIDs(b, l.QueueState(layout.QTasks, layout.Completed)))
			// The generals: claim what is pending, answer it.
			for _, id := range mustIDs(b, pend) {
				if err := os.Rename(filepath.Join(pend, id+".json"), filepath.Join(inprog, id+".json")); err != nil {
					b.Fatal(err)
				}
				res := map[string]any{"task_id": id, "status": "success", "summary": "done", "general": "gen-pr",
					"duration_seconds": 0.1, "completed_at": doc.FormatTime(time.Now()), "retry_count": 0,
					"cost_usd": 0.01, "soldier_id": "soldier-" + id}
				writeJSONB(b, l.ResultFinal(id), res)
			}
		}
		tasks += n
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(tasks), "cpu-ms/task")
}

func mustIDs(b *testing.B, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if name := e.Name(); name[0] != '.' && filepath.Ext(name) == ".json" {
			out = append(out, name[:len(name)-len(".json")])
		}
	}
	return out
}
