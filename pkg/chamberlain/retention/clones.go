package retention

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// cleanClones removes the base clones (workspace/<general>/repos/<repo>/)
// that no task used since cutoff (retention.clone_days).
// A clone with a live worktree is kept; the removal holds the clone's lock
// (skipped when a general holds it) and is verified on disk.
func (c *Cleaner) cleanClones(cutoff time.Time) (int, error) {
	return c.removeEach("repos", func(dir string, e os.DirEntry) (bool, error) {
		clone := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || lastUse(clone).After(cutoff) || hasLiveWorktree(clone) {
			return false, nil
		}
		removed, err := removeClone(clone)
		if removed {
			c.log.Info("removed unused base clone", "clone", clone, "cat", "CLEANUP")
		}
		return removed, err
	})
}

// lastUse is the latest of the clone's use marker, its last fetch and the
// directory itself.
func lastUse(clone string) time.Time {
	var t time.Time
	for _, p := range []string{layout.CloneUsedMarker(clone), filepath.Join(clone, ".git", "FETCH_HEAD"), clone} {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// hasLiveWorktree reports whether a worktree registered in the clone still
// exists on disk (a task is using it).
func hasLiveWorktree(clone string) bool {
	wts, err := os.ReadDir(filepath.Join(clone, ".git", "worktrees"))
	if err != nil {
		return false
	}
	for _, w := range wts {
		b, err := os.ReadFile(filepath.Join(clone, ".git", "worktrees", w.Name(), "gitdir"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(strings.TrimSpace(string(b))); err == nil {
			return true
		}
	}
	return false
}

// removeClone deletes clone under its lock; removed is false when a general
// holds the lock (it is using the clone right now).
func removeClone(clone string) (removed bool, err error) {
	lf, err := lockfile.Open(layout.CloneLock(clone))
	if err != nil {
		return false, err
	}
	defer lf.Close()
	ok, err := lf.TryLock()
	if err != nil || !ok {
		return false, err
	}
	defer lf.Unlock()
	if err := os.RemoveAll(clone); err != nil {
		return false, fmt.Errorf("remove clone %s: %w", clone, err)
	}
	if _, err := os.Lstat(clone); !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove clone %s: still on disk", clone)
	}
	return true, nil
}
