package queue_test

import (
	"errors"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Create stages a file for an id the caller knows is new: it appears at
// Commit, never replaces a file already in its state, and a repeat in the
// same batch is refused.
func TestBatch_CreateNeverReplacesInItsState(t *testing.T) {
	l, _ := newTree(t)
	tasks := queue.New(l, layout.QTasks, nil)
	if err := tasks.Put(layout.Pending, "task-20260101-002", map[string]any{"id": "theirs"}); err != nil {
		t.Fatal(err)
	}
	b := queue.NewBatch()
	fresh, err := b.Create(tasks, layout.Pending, "task-20260101-001", map[string]any{"id": "task-20260101-001"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := b.Create(tasks, layout.Pending, "task-20260101-001", map[string]any{"id": "dup"})
	taken, _ := b.Create(tasks, layout.Pending, "task-20260101-002", map[string]any{"id": "mine"})
	if _, err := b.Create(tasks, layout.Pending, "../x", map[string]any{}); err == nil {
		t.Error("unsafe id staged")
	}
	if _, err := b.Create(tasks, "nowhere", "task-20260101-003", map[string]any{}); err == nil {
		t.Error("unknown state staged")
	}
	if tasks.Exists(layout.Pending, "task-20260101-001") {
		t.Fatal("visible before Commit")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if fresh.Err() != nil || !errors.Is(again.Err(), queue.ErrExists) || !errors.Is(taken.Err(), queue.ErrExists) {
		t.Errorf("errs: fresh %v again %v taken %v", fresh.Err(), again.Err(), taken.Err())
	}
	var got map[string]any
	if err := tasks.ReadJSON(layout.Pending, "task-20260101-002", &got); err != nil || got["id"] != "theirs" {
		t.Errorf("existing file replaced: %v %v", got, err)
	}
	if err := tasks.ReadJSON(layout.Pending, "task-20260101-001", &got); err != nil || got["id"] != "task-20260101-001" {
		t.Errorf("created file: %v %v", got, err)
	}
}

// Every entry List returns outside rejected/ passed CheckDocument, and says
// so (Checked), so a consumer need not validate it again.
func TestList_EntriesAreChecked(t *testing.T) {
	l, _ := newTree(t)
	events := queue.New(l, layout.QEvents, nil)
	ev := map[string]any{"id": "evt-1", "type": "github.pr.opened", "source": "github", "repo": nil, "payload": map[string]any{},
		"priority": "normal", "created_at": "2026-11-21T10:00:00Z", "status": "pending"}
	if err := events.Put(layout.Pending, "evt-1", ev); err != nil {
		t.Fatal(err)
	}
	if err := events.Put(layout.Pending, "evt-2", map[string]any{"id": "evt-2"}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second List knows evt-1 from its cache
		es, err := events.List(layout.Pending)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].ID != "evt-1" || !es[0].Checked {
			t.Fatalf("entries %+v, want evt-1 checked (evt-2 rejected)", es)
		}
	}
	rej, _ := events.List(layout.Rejected)
	for _, e := range rej {
		if e.Checked {
			t.Errorf("rejected %s marked checked", e.ID)
		}
	}
}
