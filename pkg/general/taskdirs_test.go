package general

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Issue #17: a finished task's dir is emptied and kept; the next task
// takes it and rewrites Kingdom's files in place (the same inodes, no
// create, no free), and nothing of the first task — the agent's files,
// junk a lingering process wrote into the kept dir, a symlink or hard link
// planted at one of Kingdom's names — reaches the second.
func TestTaskDirs_RecycledDirKeepsInodesAndNothingOfTheLastTask(t *testing.T) {
	e := newEnv(t)
	e.m.Instructions = "first instructions"
	e.scenario("task-20260101-300", map[string]any{"mode": "dirty"})
	e.start()
	e.task("task-20260101-300")
	if r := e.final("task-20260101-300"); r.Status != "success" {
		t.Fatalf("first task: %+v", r)
	}
	first := e.l.TaskDir("gen-test", "task-20260101-300")
	if _, err := os.Lstat(first); err == nil {
		t.Fatalf("finished task dir %s still in tasks/", first)
	}
	spares, _ := os.ReadDir(e.l.TaskDirSpares("gen-test"))
	if len(spares) != 1 {
		t.Fatalf("spare task dirs: %d, want 1", len(spares))
	}
	kept := filepath.Join(e.l.TaskDirSpares("gen-test"), spares[0].Name())
	if _, err := os.Lstat(filepath.Join(kept, "repo", "dirty.txt")); err == nil {
		t.Error("the agent's file was kept with the spare dir")
	}
	claudeIno := inodeOf(t, filepath.Join(kept, "CLAUDE.md"))
	agentsIno := inodeOf(t, filepath.Join(kept, "repo", "AGENTS.md"))

	// What a process of the old soldier could still do in its cwd, and
	// links planted at Kingdom's names.
	victim := filepath.Join(e.l.Base, "victim")
	os.WriteFile(victim, []byte("keep me\n"), 0o600)
	os.WriteFile(filepath.Join(kept, "repo", "late.txt"), []byte("late"), 0o600)
	os.MkdirAll(filepath.Join(kept, "repo", "ro", "sub"), 0o700)
	os.Chmod(filepath.Join(kept, "repo", "ro"), 0o500)
	os.WriteFile(filepath.Join(kept, "notes.txt"), []byte("x"), 0o600)
	os.Remove(filepath.Join(kept, ".kingdom-task.json"))
	os.Link(victim, filepath.Join(kept, ".kingdom-task.json"))
	os.Remove(filepath.Join(kept, "AGENTS.md"))
	os.Symlink(victim, filepath.Join(kept, "AGENTS.md"))
	old := time.Now().Add(-72 * time.Hour)
	os.Chtimes(kept, old, old)

	e.m.Instructions = "second instructions"
	e.scenario("task-20260101-301", map[string]any{"mode": "hang"})
	e.task("task-20260101-301")
	e.tickUntil("second soldier", func() bool { return sessionOf(e, "task-20260101-301") != "" })
	dir := e.l.TaskDir("gen-test", "task-20260101-301")
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	if got := strings.Join(names, " "); got != ".kingdom-task.json AGENTS.md CLAUDE.md repo repo/AGENTS.md" {
		t.Errorf("second task dir holds %q", got)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("a planted link was written through: victim = %q", b)
	}
	for _, f := range []string{"CLAUDE.md", "AGENTS.md", "repo/AGENTS.md"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !strings.Contains(string(b), "second instructions") || strings.Contains(string(b), "first instructions") {
			t.Errorf("%s = %q (%v), want the second task's instructions only", f, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".kingdom-task.json")); !strings.Contains(string(b), "task-20260101-301") {
		t.Errorf(".kingdom-task.json = %q", b)
	}
	if inodeOf(t, filepath.Join(dir, "CLAUDE.md")) != claudeIno || inodeOf(t, filepath.Join(dir, "repo", "AGENTS.md")) != agentsIno {
		t.Error("the recycled dir's files were made anew, not rewritten in place")
	}
	if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) > time.Hour {
		t.Errorf("recycled task dir mtime %v: retention would count from the old task", fi.ModTime())
	}
	tmuxC.Kill(context.Background(), sessionOf(e, "task-20260101-301"))
	e.final("task-20260101-301")
}
