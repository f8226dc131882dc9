package general

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// A pending task addressed to another general is read once, not on every
// tick (issue #17): after the first look its file is never opened again
// while it waits. Replacing its content with garbage proves it — a re-read
// would reject it as a poison file. New files are still read, and poison
// files are still rejected.
func TestGeneral_OthersPendingTasksAreReadOnce(t *testing.T) {
	e := newEnv(t)
	e.start()
	pending := e.l.QueueState(layout.QTasks, layout.Pending)
	for _, id := range []string{"task-20260101-070", "task-20260101-071"} {
		e.task(id, func(t *schema.Task) { t.TargetGeneral = "gen-other" })
	}
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(pending, "task-20260101-070.json")
	if err := os.WriteFile(other, []byte("not json at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pending, "task-20260101-072.json"), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another general's task was read again (rejected as poison): %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.Rejected), "task-20260101-072.json")); err != nil {
		t.Errorf("a new poison file was not rejected: %v", err)
	}
	if len(e.g.others) != 2 {
		t.Errorf("remembered %d others, want 2", len(e.g.others))
	}
	os.Remove(filepath.Join(pending, "task-20260101-071.json"))
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.g.others["task-20260101-071"] {
		t.Error("a task gone from pending/ is still remembered")
	}
}
