package eventlog_test

import (
	"bufio"
	"fmt"
	"os"
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

// BenchmarkCursor_1MLines consumes a 1,000,000-line events.log from offset 0.
func BenchmarkCursor_1MLines(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "events.log")
	f, _ := os.Create(path)
	w := bufio.NewWriter(f)
	for i := 0; i < 1_000_000; i++ {
		fmt.Fprintf(w, `{"ts":"2026-11-21T10:00:00Z","type":"task.completed","actor":"gen-pr","data":{"task_id":"task-20261121-%06d","status":"success","duration_seconds":12}}`+"\n", i)
	}
	w.Flush()
	f.Close()
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, _ := eventlog.OpenCursor(path, "")
		n, err := c.Poll(func(eventlog.Event) error { return nil })
		c.Close()
		if err != nil || n != 1_000_000 {
			b.Fatal(n, err)
		}
	}
}
