package eventlog_test

import (
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
)

// BenchmarkEmit_OneProcess appends events from one process (open, shared
// flock, one write, close per line).
func BenchmarkEmit_OneProcess(b *testing.B) {
	dir := b.TempDir()
	em := eventlog.NewEmitter(filepath.Join(dir, "events.log"), filepath.Join(dir, ".rotate.lock"), "bench", nil)
	defer em.Close()
	data := map[string]any{"task_id": "task-20261121-001", "status": "success"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := em.Emit("task.completed", data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkEmit_EightProcesses: 8 processes append b.N lines each.
func BenchmarkEmit_EightProcesses(b *testing.B) {
	dir := b.TempDir()
	b.ResetTimer()
	for _, c := range spawnEmitters(b, dir, 8, b.N) {
		if err := c.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "lines/s")
}
