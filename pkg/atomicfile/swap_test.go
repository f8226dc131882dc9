package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// ReplaceSwap: the first write places the sibling (path missing), the
// second makes the sibling; from then on path and sibling are the same two
// inodes, each version whole, a shorter one with no tail of the longer.
func TestReplaceSwap_TwoInodesForEverAndWholeVersions(t *testing.T) {
	dir := t.TempDir()
	p, sib := filepath.Join(dir, "reg.json"), filepath.Join(dir, ".reg.json.swap")
	versions := []string{strings.Repeat("a", 5000), "b", strings.Repeat("c", 300), "", "dd"}
	seen := map[uint64]bool{}
	for i, v := range versions {
		if err := ReplaceSwap(p, sib, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != v {
			t.Fatalf("version %d: read %d bytes (%v), want %d", i, len(b), err, len(v))
		}
		seen[inode(t, p)] = true
		if i > 0 {
			seen[inode(t, sib)] = true
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
	}
	if len(seen) != 2 {
		t.Fatalf("%d inodes used over %d writes, want 2", len(seen), len(versions))
	}
}

// WriteInPlace rewrites the inode that is there (cutting a longer tail),
// and replaces — never writes through — a symlink or a second hard link.
func TestWriteInPlace_ReusesTheInodeButNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "CLAUDE.md")
	if err := WriteInPlace(p, []byte(strings.Repeat("x", 9000)), 0o600); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, p)
	if err := WriteInPlace(p, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "short" || inode(t, p) != ino {
		t.Fatalf("in-place rewrite: %q, same inode %v", b, inode(t, p) == ino)
	}
	victim := filepath.Join(dir, "victim")
	for _, plant := range []func() error{
		func() error { return os.Symlink(victim, p) },
		func() error { return os.Link(victim, p) },
	} {
		os.WriteFile(victim, []byte("keep"), 0o600)
		os.Remove(p)
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		if err := WriteInPlace(p, []byte("ours"), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatalf("written through a planted link: victim = %q", b)
		}
		if b, _ := os.ReadFile(p); string(b) != "ours" {
			t.Fatalf("path = %q", b)
		}
	}
}
