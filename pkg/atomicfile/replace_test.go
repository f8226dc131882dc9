package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestReplace_ReadersSeeOneVersionWholeAndNoTempIsLeft(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "soldier-id")
	a, b := strings.Repeat("a", 3000)+"\n", strings.Repeat("b", 7000)+"\n"
	if err := Replace(p, []byte(a), 0o600); err != nil {
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
		if err := Replace(p, []byte(v), 0o600); err != nil {
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
	if err := Replace(d, []byte("x"), 0o600); err == nil {
		t.Fatal("replaced a non-empty directory")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("after a failed write: %v", ents)
	}
}

// A reader that opened the file before a write keeps reading the old
// version whole, however many writes follow: no write goes into an inode
// a reader may hold, so readers need no lock.
func TestReplace_NeverWritesIntoAnOpenInode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sessions.json")
	old := strings.Repeat("o", 5000)
	if err := Replace(p, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 3 {
		if err := Replace(p, []byte(strings.Repeat(string(rune('a'+i)), 100)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(f)
	if err != nil || string(got) != old {
		t.Errorf("held reader saw %d bytes %.10q…, want the old version whole", len(got), got)
	}
}
