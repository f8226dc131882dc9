package runner

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A heartbeat is touched on the first successful tick and then at most
// once per beatEvery, however often the role ticks.
func TestBeat_TouchesAtMostOncePerInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	var b beat
	if err := b.touch(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("first tick wrote no heartbeat")
	}
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(path, old, old)
	for range 100 {
		if err := b.touch(path); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(old) {
		t.Fatalf("touched again within %v: mtime %v", beatEvery, fi.ModTime())
	}
	b.last = b.last.Add(-beatEvery) // as if a second had passed
	if err := b.touch(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); !fi.ModTime().After(old) {
		t.Fatal("not touched once the interval passed")
	}
}
