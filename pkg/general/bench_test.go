package general

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkGeneral_Overhead measures, with an instant command engine, the
// general's overhead from a task claimed to its soldier session running and
// from the raw result seen to the final result written (p50/p99 over 200
// tasks per iteration).
func BenchmarkGeneral_Overhead(b *testing.B) {
	for it := 0; it < b.N; it++ {
		e := newEnvB(b)
		var mu sync.Mutex
		marks := map[string]map[string]time.Time{}
		e.trace = func(task, m string) {
			mu.Lock()
			defer mu.Unlock()
			if marks[task] == nil {
				marks[task] = map[string]time.Time{}
			}
			marks[task][m] = time.Now()
		}
		g := e.startB(b)
		const n = 200
		for i := 0; i < n; i++ {
			e.taskB(b, fmt.Sprintf("task-20260101-%03d", i))
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			mu.Lock()
			done := 0
			for _, m := range marks {
				if _, ok := m["final"]; ok {
					done++
				}
			}
			mu.Unlock()
			if done == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d/%d tasks finished", done, n)
			}
			g.Tick(b.Context())
			time.Sleep(2 * time.Millisecond)
		}
		g.Wait()
		var spawn, final []time.Duration
		for _, m := range marks {
			spawn = append(spawn, m["running"].Sub(m["claimed"]))
			final = append(final, m["final"].Sub(m["raw"]))
		}
		b.ReportMetric(pct(spawn, 50), "claim→running-p50-ms")
		b.ReportMetric(pct(spawn, 99), "claim→running-p99-ms")
		b.ReportMetric(pct(final, 50), "raw→final-p50-ms")
		b.ReportMetric(pct(final, 99), "raw→final-p99-ms")
		os.RemoveAll(e.l.Base)
	}
}

func pct(d []time.Duration, p int) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := (len(d)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(d[i].Microseconds()) / 1000
}
