package layout

import "path/filepath"

// ReposDir is workspace/<general>/repos/, where the general's base clones
// live.
func (l Layout) ReposDir(g string) string { return l.p("workspace", g, "repos") }

// CloneLock is the per-clone lock a general holds while it clones, fetches
// or adds and removes worktrees, and the chamberlain holds while it removes
// an unused clone.
func CloneLock(clone string) string {
	return filepath.Join(filepath.Dir(clone), "."+filepath.Base(clone)+".lock")
}

// CloneUsedMarker is touched each time a task gets a worktree of the clone;
// its mtime is the clone's last use (retention.clone_days).
func CloneUsedMarker(clone string) string { return filepath.Join(clone, ".git", "kingdom-last-used") }
