package general

import (
	"io/fs"
	"path/filepath"
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
