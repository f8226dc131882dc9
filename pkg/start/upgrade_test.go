package start

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

const topDirFlag = 0x00020000 // "chattr +T", as the old code set it

func dirFlags(t *testing.T, dir string) (uint32, bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return flags, true
}

// The old layout's spare pools, kept task dirs and swap sibling go at
// start; files and dirs of the current layout that merely share a name
// pattern stay; a second run finds nothing to do.
func TestRemoveOldLayout_RemovesLeftoversOnly(t *testing.T) {
	l := layout.New(t.TempDir())
	mk := func(rel string, dir bool) string {
		p := filepath.Join(l.Base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if dir {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("state/king/spare/s-1-a-1", false)
	mk("state/king/spare-fresh/s-1-a-2", false)
	mk("state/king/.try-spare-fresh-9-0/probe", false)
	mk("state/sentinel/spare", true)
	mk("state/gen-pr/spare/s-2-b-1", false)
	mk("workspace/gen-pr/spare/77-1/repo/AGENTS.md", false)
	mk("state/.sessions.json.swap", false)
	keep := []string{
		mk("state/results/spare-x", false), // a file, not a pool
		mk("state/sentinel/seen/spare-evt-1", false),
		mk("state/king/task-seq", false),
		mk("workspace/gen-pr/tasks/task-20260101-001/CLAUDE.md", false),
		mk("state/sessions.json", false),
	}
	want := []string{
		filepath.Join(l.Base, "state/king/spare"),
		filepath.Join(l.Base, "state/king/spare-fresh"),
		filepath.Join(l.Base, "state/king/.try-spare-fresh-9-0"),
		filepath.Join(l.Base, "state/sentinel/spare"),
		filepath.Join(l.Base, "state/gen-pr/spare"),
		filepath.Join(l.Base, "workspace/gen-pr/spare"),
		filepath.Join(l.Base, "state/.sessions.json.swap"),
	}

	removed, err := RemoveOldLayout(l)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v\nwant %v", removed, want)
	}
	for _, p := range want {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if again, err := RemoveOldLayout(l); err != nil || len(again) != 0 {
		t.Errorf("second run removed %v (%v), want nothing", again, err)
	}
}

// The top-directory attribute the old code set on a role's state dir (the
// parent of its spare-fresh pool) is cleared; the dir's other flags stay.
func TestRemoveOldLayout_ClearsTheTopDirAttribute(t *testing.T) {
	l := layout.New(t.TempDir())
	role := filepath.Join(l.Base, "state", "king")
	if err := os.MkdirAll(filepath.Join(role, "spare-fresh"), 0o700); err != nil {
		t.Fatal(err)
	}
	flags, ok := dirFlags(t, role)
	if !ok {
		t.Skip("this filesystem has no attribute flags: nothing was ever set")
	}
	f, err := os.Open(role)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|topDirFlag))
	f.Close()
	if err != nil {
		t.Skipf("cannot set the attribute here to test its removal: %v", err)
	}
	if got, _ := dirFlags(t, role); got&topDirFlag == 0 {
		t.Skip("the filesystem ignores the attribute")
	}
	if _, err := RemoveOldLayout(l); err != nil {
		t.Fatal(err)
	}
	got, _ := dirFlags(t, role)
	if got&topDirFlag != 0 {
		t.Errorf("flags %#x: the top-directory attribute is still set", got)
	}
	if got != flags {
		t.Errorf("flags %#x, want the others unchanged (%#x)", got, flags)
	}
}
