package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteFileNoSync_ReadersSeeOneVersionWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "soldier-id")
	a, b := strings.Repeat("a", 3000)+"\n", strings.Repeat("b", 7000)+"\n"
	if err := WriteFileNoSync(p, []byte(a), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := os.ReadFile(p)
			if err != nil || (string(got) != a && string(got) != b) {
				t.Errorf("reader saw %d bytes (%v): neither version whole", len(got), err)
				return
			}
		}
	}()
	for i := range 300 {
		v := a
		if i%2 == 0 {
			v = b
		}
		if err := WriteFileNoSync(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temps left: %v", ents)
	}
	// A rename that fails (a directory in the way) leaves no temp.
	d := filepath.Join(dir, "adir")
	os.Mkdir(d, 0o700)
	os.WriteFile(filepath.Join(d, "x"), nil, 0o600)
	if err := WriteFileNoSync(d, []byte("x"), 0o600); err == nil {
		t.Fatal("replaced a non-empty directory")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("after a failed write: %v", ents)
	}
}
