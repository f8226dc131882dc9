package sessions_test

import (
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// Issue #13 item 5: a truncated sessions.json is rebuilt from the in-progress
// tasks' soldier-id files, so a live soldier keeps its registration (and is
// not killed as an orphan, its work retried).
func TestRegistry_TruncatedFileIsRebuiltFromSoldierIDs(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	task := "task-20261121-001"
	os.WriteFile(l.QueueState(layout.QTasks, layout.InProgress)+"/"+task+".json",
		[]byte(`{"id":"`+task+`","target_general":"gen-pr"}`), 0o600)
	os.WriteFile(l.ResultSoldierID(task), []byte("soldier-1700000000-ab12\n"), 0o600)
	// A completed task's soldier-id is history, not a live soldier.
	os.WriteFile(l.ResultSoldierID("task-20261121-000"), []byte("soldier-1600000000-cd34\n"), 0o600)
	os.WriteFile(l.SessionsJSON(), []byte(`[{"id":"soldier-1700000000-ab12","task_id":"`+task+`","gen`), 0o600)

	r := sessions.New(l)
	es, err := r.List()
	if err != nil {
		t.Fatalf("List on a truncated registry: %v", err)
	}
	if len(es) != 1 || es[0].ID != "soldier-1700000000-ab12" || es[0].TaskID != task || es[0].General != "gen-pr" || es[0].StartedAt.IsZero() {
		t.Fatalf("rebuilt = %+v, want the in-progress task's soldier", es)
	}
	// Written back whole: the next reader decodes it.
	b, _ := os.ReadFile(l.SessionsJSON())
	if len(b) == 0 || b[len(b)-2] != ']' {
		t.Errorf("registry not rewritten: %q", b)
	}
	// Update sees the same rebuilt list.
	os.WriteFile(l.SessionsJSON(), []byte(`[{"id":`), 0o600)
	var seen []sessions.Entry
	r.Update(func(es []sessions.Entry) ([]sessions.Entry, error) { seen = es; return es, nil })
	if len(seen) != 1 || seen[0].ID != "soldier-1700000000-ab12" {
		t.Fatalf("Update saw %+v", seen)
	}
}
