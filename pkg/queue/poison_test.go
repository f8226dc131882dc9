package queue_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// poison plants, in dir, every kind of entry no consumer can take and
// returns name → a word its .reason must contain.
func plantPoison(t *testing.T, dir string) map[string]string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, "task-20261121-900.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "task-20261121-901.json"), []byte(`{"id":"task-20261121-901"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "task-20261121-902.json"), []byte(`{"id":"task-20261121-902","priority":"urgent"}`), 0o600)
	return map[string]string{
		"task-20261121-900.json": "directory",
		"task-20261121-901.json": "invalid",
		"task-20261121-902.json": "invalid",
	}
}

func checkRejected(t *testing.T, q *queue.Queue, want map[string]string) {
	t.Helper()
	rej := q.Dir(layout.Rejected)
	for name, word := range want {
		if _, err := os.Lstat(filepath.Join(q.Dir(layout.Pending), name)); err == nil {
			t.Errorf("%s/%s still in pending/", q.Kind(), name)
		}
		if _, err := os.Lstat(filepath.Join(rej, name)); err != nil {
			t.Errorf("%s/%s not in rejected/: %v", q.Kind(), name, err)
			continue
		}
		reason, err := os.ReadFile(filepath.Join(rej, name+".reason"))
		if err != nil || !strings.Contains(string(reason), word) {
			t.Errorf("%s/%s reason = %q, %v; want it to mention %q", q.Kind(), name, reason, err, word)
		}
	}
}

// Issue #13 item 3: a schema-invalid file or a directory named x.json is
// never counted as work and goes to rejected/ with a reason, in every queue.
func TestQueue_CountRejectsPoisonAndCountsOnlyValidEntries(t *testing.T) {
	l := layout.New(t.TempDir())
	good := map[string]any{
		layout.QTasks: item{ID: "task-20261121-001"},
		layout.QEvents: doc.Event{ID: "task-20261121-001", Type: "test", Source: doc.SourceInbox,
			Priority: doc.PriorityNormal, CreatedAt: "2026-11-21T10:00:00Z", Status: doc.EventPending},
		layout.QMessages: doc.Message{ID: "task-20261121-001", Type: "notification", Urgency: "normal",
			Content: "hi", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"},
	}
	for _, kind := range []string{layout.QTasks, layout.QEvents, layout.QMessages} {
		t.Run(kind, func(t *testing.T) {
			q := onFiles(t, l, kind)
			want := plantPoison(t, q.Dir(layout.Pending))
			if err := q.Put(layout.Pending, "task-20261121-001", good[kind]); err != nil {
				t.Fatal(err)
			}
			if n := q.Count(layout.Pending); n != 1 {
				t.Errorf("Count(pending) = %d, want 1 (only the valid entry)", n)
			}
			checkRejected(t, q, want)
			if n := q.Count(layout.Rejected); n != len(want) {
				t.Errorf("Count(rejected) = %d, want %d", n, len(want))
			}
			// A second count reads nothing new and still finds the valid one.
			if n := q.Count(layout.Pending); n != 1 {
				t.Errorf("second Count(pending) = %d, want 1", n)
			}
		})
	}
}

func TestQueue_ListRejectsDirectoriesSchemaViolationsAndIDMismatch(t *testing.T) {
	_, q := newTree(t)
	dir := q.Dir(layout.Pending)
	want := plantPoison(t, dir)
	// Valid task, but its id is not its file name.
	if err := q.Put(layout.Pending, "task-20261121-903", item{ID: "task-20261121-904"}); err != nil {
		t.Fatal(err)
	}
	want["task-20261121-903.json"] = "does not match the file name"
	if err := q.Put(layout.Pending, "task-20261121-001", item{ID: "task-20261121-001"}); err != nil {
		t.Fatal(err)
	}
	es, err := q.List(layout.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ID != "task-20261121-001" {
		t.Fatalf("List = %v, want only task-20261121-001", es)
	}
	checkRejected(t, q, want)
	idl, _ := q.IDs(layout.Pending)
	if len(idl) != 1 {
		t.Errorf("IDs = %v, want one", idl)
	}
}

func TestQueue_CountSeesARewrittenFileAgain(t *testing.T) {
	_, q := newTree(t)
	if err := q.Put(layout.Pending, "task-20261121-001", item{ID: "task-20261121-001"}); err != nil {
		t.Fatal(err)
	}
	if n := q.Count(layout.Pending); n != 1 {
		t.Fatalf("Count = %d, want 1", n)
	}
	// Replaced by something invalid (a new inode): counted no more, rejected.
	if err := q.Put(layout.Pending, "task-20261121-001", map[string]any{"id": "task-20261121-001"}); err != nil {
		t.Fatal(err)
	}
	if n := q.Count(layout.Pending); n != 0 {
		t.Fatalf("Count after an invalid rewrite = %d, want 0", n)
	}
	if !q.Exists(layout.Rejected, "task-20261121-001") {
		t.Error("the rewritten file was not rejected")
	}
}

// List remembers the files it validated too, and still catches a file
// replaced by an invalid one.
func TestQueue_ListSeesARewrittenFileAgain(t *testing.T) {
	_, q := newTree(t)
	if err := q.Put(layout.Pending, "task-20261121-001", item{ID: "task-20261121-001"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if es, _ := q.List(layout.Pending); len(es) != 1 {
			t.Fatalf("List = %d entries, want 1", len(es))
		}
	}
	if err := q.Put(layout.Pending, "task-20261121-001", map[string]any{"id": "task-20261121-001"}); err != nil {
		t.Fatal(err)
	}
	if es, _ := q.List(layout.Pending); len(es) != 0 {
		t.Fatalf("List after an invalid rewrite = %d entries, want 0", len(es))
	}
	if !q.Exists(layout.Rejected, "task-20261121-001") {
		t.Error("the rewritten file was not rejected")
	}
}
