package general

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Issue #13 item 9: a base clone is private — no group or other bits on
// anything git wrote, under any umask.
func TestWorkspace_BaseCloneIsPrivate(t *testing.T) {
	e := newEnv(t)
	withRepo(t, e)
	e.m.DefaultRepo = "acme/app"
	e.scenario("task-20260101-100", map[string]any{"mode": "success"})
	e.start()
	e.task("task-20260101-100")
	if r := e.final("task-20260101-100"); r.Status != "success" {
		t.Fatalf("task: %+v", r)
	}
	clone := e.l.RepoClone("gen-test", "acme/app")
	n := 0
	filepath.WalkDir(clone, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		n++
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v, want no group/other access", p, fi.Mode().Perm())
		}
		return nil
	})
	if n < 10 {
		t.Fatalf("only %d entries in the clone: the walk proves nothing", n)
	}
}

// Issue #13 item 10: a task dir the agent left read-only (a module cache,
// chmod -w) is still removed, and the removal is checked on disk. Read-only
// directories only stop a non-root user, so as root the removal runs in a
// copy of this test binary as nobody.
func TestRemoveTree_ReadOnlyLeftoversAreRemovedAndVerified(t *testing.T) {
	dir, err := os.MkdirTemp("", "kingdom-removetree-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	root := filepath.Join(dir, "task")
	ro := filepath.Join(root, "repo", "cache", "mod")
	if err := os.MkdirAll(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ro, "f.go"), []byte("x"), 0o400)
	if os.Geteuid() != 0 {
		os.Chmod(ro, 0o500)
		os.Chmod(filepath.Dir(ro), 0o500)
		if err := removeTree(root); err != nil {
			t.Fatal(err)
		}
	} else {
		const nobody = 65534
		bin := filepath.Join(dir, "general.test")
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		filepath.WalkDir(root, func(p string, _ fs.DirEntry, _ error) error { return os.Lchown(p, nobody, nobody) })
		os.Chmod(dir, 0o777) // nobody may remove "task" itself
		os.Chmod(ro, 0o500)
		os.Chmod(filepath.Dir(ro), 0o500)
		cmd := exec.Command(bin, "-test.run=^TestRemoveTree_ReadOnlyLeftoversAreRemovedAndVerified$")
		cmd.Env = append(os.Environ(), "KINGDOM_REMOVE_TREE="+root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("removeTree as nobody: %v\n%s", err, out)
		}
	}
	if _, err := os.Lstat(root); err == nil {
		t.Fatal("task dir still on disk")
	}
}

// removeTreeHelper is the test binary's other life: removeTree(p) as the
// user it was started as, exit 0 on success.
func removeTreeHelper(p string) {
	if err := removeTree(p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
