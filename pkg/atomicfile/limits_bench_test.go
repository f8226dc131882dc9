package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The machine's own limits, measured in the same run and the same kind of
// directory (b.TempDir) as the queue benchmarks, so docs/benchmarks.md can
// put each figure beside what the disk allows.

var limitData = make([]byte, 600) // about one queue file

// BenchmarkLimit_Fsync: write 600 bytes to an open file and fsync it.
func BenchmarkLimit_Fsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		f.WriteAt(limitData, 0)
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimit_Create: create, write and close a small file (no fsync).
func BenchmarkLimit_Create(b *testing.B) {
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), limitData, 0o600); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLimit_Rename: rename a file within a directory.
func BenchmarkLimit_Rename(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "0")
	os.WriteFile(p, limitData, 0o600)
	i := 0
	for b.Loop() {
		q := filepath.Join(dir, fmt.Sprint(i+1))
		if err := os.Rename(p, q); err != nil {
			b.Fatal(err)
		}
		p = q
		i++
	}
}

// BenchmarkLimit_DurablePut: one durable file the classic way (temp,
// fsync, rename, directory fsync) — WriteFile.
func BenchmarkLimit_DurablePut(b *testing.B) {
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		if err := WriteFile(filepath.Join(dir, fmt.Sprint(i)), limitData, 0o600); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
