package chamberlain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// A task dir that a pending or running resume borrows (a question's, or a
// resume waiting out a week-long usage limit) outlives task_dirs_days: the
// resume runs in it. Once no resume holds it, it ages out as any other.
func TestCleanup_KeepsATaskDirABorrowingResumeNeeds(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	e := newEnv(t, now)
	l := e.l
	old := now.Add(-8 * 24 * time.Hour)
	borrowed := l.TaskDir("gen-pr", "task-20261110-001")
	writeFile(t, filepath.Join(borrowed, "repo", "f.txt"), "x")
	os.Chtimes(borrowed, old, old)
	resume := schema.Task{ID: "task-20261120-002", EventID: "evt-r", TargetGeneral: "gen-pr", Type: schema.TaskTypeResume,
		Priority: "normal", CreatedAt: schema.FormatTime(old), Status: schema.TaskPending, SessionID: "s-1",
		OriginalTaskID: "task-20261110-001", Workdir: filepath.Join(borrowed, "repo"), NotBefore: schema.FormatTime(now.Add(5 * 24 * time.Hour))}
	b, _ := json.Marshal(resume)
	pending := filepath.Join(l.QueueState(layout.QTasks, layout.Pending), resume.ID+".json")
	writeFile(t, pending, string(b))
	r := e.role(ModeDaemon)
	r.load(now)
	if err := r.cleanup(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(borrowed); err != nil {
		t.Fatalf("the task dir a pending resume borrows was removed: %v", err)
	}
	// The resume finished: the dir ages out.
	if err := os.Rename(pending, filepath.Join(l.QueueState(layout.QTasks, layout.Completed), resume.ID+".json")); err != nil {
		t.Fatal(err)
	}
	if err := r.cleanup(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(borrowed); err == nil {
		t.Fatal("the task dir survived once no resume borrowed it")
	}
}
