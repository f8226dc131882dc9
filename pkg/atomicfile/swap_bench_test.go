package atomicfile

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// BenchmarkRegistryWrite: one small registry rewrite (a sessions.json of a
// few entries, no fsync, as sessions writes it) the old way — a temp
// created and renamed over the file, which frees the old inode — and
// through the kept sibling (ReplaceSwap: no create, no free). cpu-us/op is
// this process's user+system CPU: on ext4 without a journal each create
// scans past the inodes freed in the last minute, so the old way grows
// dearer the longer it runs.
func BenchmarkRegistryWrite(b *testing.B) {
	data := []byte("[\n" + strings.Repeat(`  {"id": "soldier-20260101-000000-abcd", "task_id": "task-20260101-001", "general": "gen-a", "started_at": "2026-01-01T00:00:00Z"},`+"\n", 4) + "]\n")
	for _, c := range []struct {
		name  string
		write func(p, sib string) error
	}{
		{"replace", func(p, _ string) error { return Replace(p, data, 0o600) }},
		{"swap", func(p, sib string) error { return ReplaceSwap(p, sib, data, 0o600) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			p, sib := filepath.Join(dir, "sessions.json"), filepath.Join(dir, ".sessions.json.swap")
			b.ResetTimer()
			cpu := proctree.SelfCPU()
			for i := 0; i < b.N; i++ {
				if err := c.write(p, sib); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((proctree.SelfCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}
