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

func TestAdmitBatch_NewSeenQueuedAndRepeatedIDs(t *testing.T) {
	l, _ := newTree(t)
	events := queue.New(l, layout.QEvents, nil)
	a := queue.NewAdmitter(l, events)
	if err := a.MarkSeen("evt-seen"); err != nil {
		t.Fatal(err)
	}
	if err := events.Put(layout.Dispatched, "evt-queued", map[string]any{"id": "evt-queued"}); err != nil {
		t.Fatal(err)
	}
	idl := []string{"evt-a", "evt-seen", "evt-queued", "evt-b", "evt-a", "../bad"}
	evs := make([]any, len(idl))
	for i, id := range idl {
		evs[i] = map[string]any{"id": id}
	}
	errs := a.AdmitBatch(idl, evs)
	want := []string{"ok", "dup", "dup", "ok", "dup", "err"}
	for i, w := range want {
		got := "ok"
		switch {
		case errors.Is(errs[i], queue.ErrDuplicate):
			got = "dup"
		case errs[i] != nil:
			got = "err"
		}
		if got != w {
			t.Errorf("%s: %v, want %s", idl[i], errs[i], w)
		}
	}
	for _, id := range []string{"evt-a", "evt-b", "evt-queued"} {
		if !a.Seen(id) {
			t.Errorf("%s has no seen marker", id)
		}
	}
	if !events.Exists(layout.Pending, "evt-a") || !events.Exists(layout.Pending, "evt-b") || events.Exists(layout.Pending, "evt-queued") {
		t.Error("pending/ does not hold exactly the new events")
	}
}
