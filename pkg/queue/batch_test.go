package queue_test

import (
	"errors"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

func TestBatch_PutsAcrossQueuesAppearAtCommitAndPutOnceRefusesKnownIDs(t *testing.T) {
	l, _ := newTree(t)
	events := queue.New(l, layout.QEvents, nil)
	tasks := queue.New(l, layout.QTasks, nil)
	if err := events.Put(layout.Completed, "evt-old", map[string]any{"id": "evt-old"}); err != nil {
		t.Fatal(err)
	}
	b := queue.NewBatch()
	if err := b.Put(events, layout.Dispatched, "evt-1", map[string]any{"id": "evt-1"}); err != nil {
		t.Fatal(err)
	}
	fresh, err := b.PutOnce(tasks, layout.Pending, "task-20260101-001", map[string]any{"id": "task-20260101-001"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := b.PutOnce(tasks, layout.Pending, "task-20260101-001", map[string]any{"id": "dup"})
	known, _ := b.PutOnce(events, layout.Pending, "evt-old", map[string]any{"id": "evt-old"})
	if _, err := b.PutOnce(tasks, layout.Pending, "../x", map[string]any{}); err == nil {
		t.Error("unsafe id staged")
	}
	if events.Exists(layout.Dispatched, "evt-1") || tasks.Exists(layout.Pending, "task-20260101-001") {
		t.Fatal("visible before Commit")
	}
	// Someone else creates a staged id meanwhile: the no-replace rename
	// refuses it at Commit.
	late, _ := b.PutOnce(tasks, layout.Pending, "task-20260101-002", map[string]any{"id": "mine"})
	if err := tasks.Put(layout.Pending, "task-20260101-002", map[string]any{"id": "theirs"}); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 {
		t.Errorf("staged %d, want 3", b.Len())
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if fresh.Err() != nil || !errors.Is(again.Err(), queue.ErrExists) || !errors.Is(known.Err(), queue.ErrExists) || !errors.Is(late.Err(), queue.ErrExists) {
		t.Errorf("errs: fresh %v again %v known %v late %v", fresh.Err(), again.Err(), known.Err(), late.Err())
	}
	var got map[string]any
	if err := tasks.ReadJSON(layout.Pending, "task-20260101-002", &got); err != nil || got["id"] != "theirs" {
		t.Errorf("late writer's file replaced: %v %v", got, err)
	}
	if !events.Exists(layout.Dispatched, "evt-1") || !tasks.Exists(layout.Pending, "task-20260101-001") {
		t.Error("committed files missing")
	}
}
