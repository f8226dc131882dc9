package general

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Every tick lists pending/ afresh: a task addressed to another general is
// left where it is, and when its file later turns bad the next tick sees
// it (and rejects it as poison) instead of trusting an earlier look.
func TestGeneral_PendingIsListedEveryTick(t *testing.T) {
	e := newEnv(t)
	e.start()
	pending := e.l.QueueState(layout.QTasks, layout.Pending)
	rejected := e.l.QueueState(layout.QTasks, layout.Rejected)
	for _, id := range []string{"task-20260101-070", "task-20260101-071"} {
		e.task(id, func(t *doc.Task) { t.TargetGeneral = "gen-other" })
	}
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"task-20260101-070", "task-20260101-071"} {
		if _, err := os.Stat(filepath.Join(pending, id+".json")); err != nil {
			t.Fatalf("another general's task %s left pending/: %v", id, err)
		}
	}
	if err := os.WriteFile(filepath.Join(pending, "task-20260101-070.json"), []byte("not json at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rejected, "task-20260101-070.json")); err != nil {
		t.Errorf("a task file that turned bad was not seen again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pending, "task-20260101-071.json")); err != nil {
		t.Errorf("another general's good task was moved: %v", err)
	}
}
