package king

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func completedDoc(t *testing.T, f *fixture, id string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.l.QueueState(layout.QEvents, layout.Completed), id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Event files in events/completed/ say "completed"; a discarded one says why.
func TestKing_CompletedEventFilesSayCompleted(t *testing.T) {
	f := started(t)
	f.finalResult(task1, map[string]any{"status": "success"})
	f.event("evt-nobody", "github.notification.ci_activity", "low")
	f.tick()

	if doc := completedDoc(t, f, "evt-1"); doc["status"] != "completed" || doc["task_id"] != task1 {
		t.Errorf("dispatched then completed event: %v", doc)
	}
	doc := completedDoc(t, f, "evt-nobody")
	if doc["status"] != "completed" || doc["discarded"] != "no general subscribes to github.notification.ci_activity" {
		t.Errorf("discarded event: %v", doc)
	}
	ds := f.internal("event.discarded")
	if len(ds) != 1 || data(ds[0])["event_id"] != "evt-nobody" || data(ds[0])["reason"] == "" {
		t.Fatalf("event.discarded = %+v", ds)
	}
}
