package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWritePrivate_ReplacesInPlaceAndRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "prompt.md")
	if err := WritePrivate(p, []byte("a longer first version"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivate(p, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "short" {
		t.Errorf("content %q, want the second write whole", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temps left: %v", ents)
	}
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, []byte("keep"), 0o600)
	link := filepath.Join(dir, "link.md")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivate(link, []byte("x"), 0o600); err == nil {
		t.Error("wrote through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("symlink target changed: %q", b)
	}
}

// Replace swaps in a whole new version (a concurrent reader never sees a
// partial one), with mode 0600 and no temp left beside it.
func TestReplace_ReaderSeesOnlyWholeVersions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.json")
	a, b := bytes.Repeat([]byte("a"), 256<<10), bytes.Repeat([]byte("b"), 256<<10)
	if err := Replace(path, a, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			v := a
			if i%2 == 0 {
				v = b
			}
			if err := Replace(path, v, 0o600); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("dir holds %d entries, want only the file", len(ents))
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", fi.Mode().Perm())
			}
			return
		default:
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read a partial version (%d bytes)", len(got))
		}
	}
}
