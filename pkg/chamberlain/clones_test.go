package chamberlain

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// Issue #13 item 10: base clones unused for retention.clone_days are
// removed by the daily cleanup; a recently used one, one with a live
// worktree and one a general holds locked are kept.
func TestCleanup_RemovesBaseClonesUnusedForCloneDays(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	e := newEnv(t, now)
	l := e.l
	old := now.Add(-15 * 24 * time.Hour) // clone_days: 14
	clone := func(name string, used time.Time) string {
		c := l.RepoClone("gen-pr", name)
		writeFile(t, filepath.Join(c, ".git", "HEAD"), "ref: refs/heads/main\n")
		writeFile(t, filepath.Join(c, ".git", "objects", "pack", "p.pack"), "x")
		setMtime(t, layout.CloneUsedMarker(c), used)
		for _, d := range []string{filepath.Join(c, ".git", "objects", "pack"), filepath.Join(c, ".git", "objects"), filepath.Join(c, ".git"), c} {
			os.Chtimes(d, old, old)
		}
		return c
	}
	unused := clone("acme/old", old)
	fresh := clone("acme/fresh", now.Add(-24*time.Hour))
	busy := clone("acme/busy", old)
	live := l.TaskDir("gen-pr", "task-20261121-001")
	writeFile(t, filepath.Join(live, "repo", ".git"), "gitdir: x\n")
	writeFile(t, filepath.Join(busy, ".git", "worktrees", "repo", "gitdir"), filepath.Join(live, "repo", ".git")+"\n")
	os.Chtimes(busy, old, old)
	locked := clone("acme/locked", old)
	lf, err := lockfile.Open(layout.CloneLock(locked))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := lf.Lock(); err != nil {
		t.Fatal(err)
	}

	r := e.role(ModeDaemon)
	r.load(now)
	if err := r.cleanup(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(unused); err == nil {
		t.Error("a clone unused for 15 days is still on disk")
	}
	for _, c := range []string{fresh, busy, locked} {
		if _, err := os.Stat(filepath.Join(c, ".git", "HEAD")); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(c), err)
		}
	}
}
