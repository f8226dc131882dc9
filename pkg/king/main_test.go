package king

import (
	"os"
	"sync"
	"testing"
)

// The benchmarks' directories are removed after the package's last
// benchmark, not each at its end. On ext4 without a journal a create skips
// every inode of its block group freed in the last minute, so one
// benchmark's cleanup (tens of thousands of files) would bill the next
// one's creates; the figures would depend on their order.
var benchRoot struct {
	once sync.Once
	dir  string
	err  error
}

// benchTempDir is a fresh directory removed after every test and benchmark
// of the package ran.
func benchTempDir(b *testing.B) string {
	b.Helper()
	benchRoot.once.Do(func() { benchRoot.dir, benchRoot.err = os.MkdirTemp("", "king-bench-") })
	if benchRoot.err != nil {
		b.Fatal(benchRoot.err)
	}
	d, err := os.MkdirTemp(benchRoot.dir, "")
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchRoot.dir != "" {
		os.RemoveAll(benchRoot.dir)
	}
	os.Exit(code)
}
