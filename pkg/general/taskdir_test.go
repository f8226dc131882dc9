package general

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Every attempt gets a new task dir: whatever an earlier attempt left (an
// agent's files, a hard link planted at one of Kingdom's names) is gone,
// Kingdom's files are written anew without touching the link's target, and
// a finished task's dir is removed outright, kept nowhere.
func TestWorkspace_EveryAttemptGetsAFreshTaskDir(t *testing.T) {
	e := newEnv(t)
	g := e.start()
	task := &doc.Task{ID: "task-20260101-300", TargetGeneral: e.m.Name, Type: "test.run",
		Payload: map[string]any{}, Priority: "normal", Status: "in_progress"}
	dir := e.l.TaskDir(g.name, task.ID)
	if err := os.MkdirAll(filepath.Join(dir, "repo"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "repo", "left.txt"), []byte("earlier attempt"), 0o600)
	victim := filepath.Join(e.l.Base, "victim")
	os.WriteFile(victim, []byte("keep me\n"), 0o600)
	if err := os.Link(victim, filepath.Join(dir, "CLAUDE.md")); err != nil {
		t.Fatal(err)
	}

	ws, err := g.prepareWorkspace(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "repo", "left.txt")); err == nil {
		t.Error("an earlier attempt's file reached the new attempt")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the planted link's target was written: %q", b)
	}
	for _, name := range []string{"CLAUDE.md", "AGENTS.md", ".kingdom-task.json", "repo/AGENTS.md"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a regular 0600 file", name, fi, err)
		}
	}

	g.removeWorkspace(context.Background(), ws)
	if _, err := os.Lstat(dir); err == nil {
		t.Error("the finished task dir is still there")
	}
	ents, _ := os.ReadDir(e.l.WorkspaceGeneral(g.name))
	for _, en := range ents {
		if en.Name() != "tasks" && en.Name() != "repos" {
			t.Errorf("workspace keeps %s beside tasks/", en.Name())
		}
	}
}
