package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadLimited_RegularFilesUpToTheLimitOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "result.json")
	os.WriteFile(p, []byte("12345"), 0o600)
	if b, err := ReadLimited(p, 5); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	if _, err := ReadLimited(p, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
	if _, err := ReadLimited(filepath.Join(dir, "none"), 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v, want ErrNotExist", err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(p, link)
	if _, err := ReadLimited(link, 5); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlink: %v, want ErrNotRegular (symlink)", err)
	}
	if _, err := ReadLimited(dir, 5); !errors.Is(err, ErrNotRegular) {
		t.Errorf("directory: %v, want ErrNotRegular", err)
	}
	// A FIFO nobody writes to would block a plain open forever.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLimited(fifo, 5); !errors.Is(err, ErrNotRegular) {
		t.Errorf("fifo: %v, want ErrNotRegular", err)
	}
}
