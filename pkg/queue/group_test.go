package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

func testEvent(id string) doc.Event {
	return doc.Event{ID: id, Type: "test", Source: doc.SourceInbox, Payload: map[string]any{},
		Priority: doc.PriorityNormal, CreatedAt: "2026-11-21T10:00:00Z", Status: doc.EventPending}
}

func testMessage(id, task string) doc.Message {
	return doc.Message{ID: id, Type: "thread_start", TaskID: doc.StringPtr(task), Channel: "C1",
		Urgency: doc.UrgencyNormal, Content: "hi", Context: map[string]any{},
		CreatedAt: "2026-11-21T10:00:00Z", Status: doc.MessagePending}
}

// dispatch is the king's dispatch as one group: the event to dispatched/,
// its pending copy gone, the task, its thread_start, task.created. fail
// makes the last step fail.
func dispatch(e *env, events, tasks, msgs *queue.Queue, evID, taskID string, fail error) error {
	return queue.Group(context.Background(), func(g *queue.GroupTx) error {
		ev := testEvent(evID)
		ev.Status = doc.EventDispatched
		if err := g.Put(events, layout.Dispatched, evID, ev); err != nil {
			return err
		}
		if err := g.Remove(events, layout.Pending, evID); err != nil {
			return err
		}
		// A repeat after a crash finds the task there: tolerated, as the
		// king does, and the group goes on.
		if err := g.PutOnce(tasks, layout.Pending, taskID, item{ID: taskID}); err != nil && !errors.Is(err, queue.ErrExists) {
			return err
		}
		if err := g.PutOnce(msgs, layout.Pending, "msg-"+taskID+"-thread_start", testMessage("msg-"+taskID+"-thread_start", taskID)); err != nil && !errors.Is(err, queue.ErrExists) {
			return err
		}
		if err := g.Emit(e.em, "task.created", map[string]any{"task_id": taskID}); err != nil {
			return err
		}
		return fail
	}, events, tasks, msgs)
}

func TestGroup_DispatchIsOneUnit(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		events, tasks, msgs := e.queue(layout.QEvents), e.queue(layout.QTasks), e.queue(layout.QMessages)
		const evID, taskID = "evt-inbox-1", "task-20261121-001"
		if err := events.PutOnce(layout.Pending, evID, testEvent(evID)); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if err := dispatch(e, events, tasks, msgs, evID, taskID, boom); !errors.Is(err, boom) {
			t.Fatalf("failing group: %v, want boom", err)
		}
		msgID := "msg-" + taskID + "-thread_start"
		// Rolled back: nothing of it happened.
		if s, _ := events.Find(evID); s != layout.Pending {
			t.Errorf("event in %q after a failed group, want pending", s)
		}
		if _, ok := tasks.Find(taskID); ok {
			t.Error("task written by a failed group")
		}
		if _, ok := msgs.Find(msgID); ok {
			t.Error("thread_start written by a failed group")
		}
		if n := countEvents(t, e, "task.created"); n != 0 {
			t.Errorf("task.created emitted %d times by a failed group", n)
		}
		if err := dispatch(e, events, tasks, msgs, evID, taskID, nil); err != nil {
			t.Fatal(err)
		}
		if s, _ := events.Find(evID); s != layout.Dispatched {
			t.Errorf("event in %q, want dispatched", s)
		}
		if !tasks.Exists(layout.Pending, taskID) || !msgs.Exists(layout.Pending, msgID) {
			t.Error("task or thread_start missing after the group")
		}
		// A repeat (a restart finishing the same dispatch) keeps going past
		// the task and message already there.
		events.Put(layout.Pending, evID, testEvent(evID))
		if err := dispatch(e, events, tasks, msgs, evID, taskID, nil); err != nil {
			t.Fatalf("repeated group: %v", err)
		}
		if events.Exists(layout.Pending, evID) {
			t.Error("repeated group left the pending copy")
		}
		want := 2
		if n := countEvents(t, e, "task.created"); n != want {
			t.Errorf("task.created emitted %d times, want %d", n, want)
		}
	})
}

func TestGroup_RefusesQueuesOnDifferentBackends(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		other, err := files.Open(layout.New(t.TempDir()), "test-host")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		onFiles := queue.OnStore(other, e.l, layout.QTasks, nil, "test-host")
		err = queue.Group(context.Background(), func(*queue.GroupTx) error { return nil }, e.queue(layout.QEvents), onFiles)
		if err == nil {
			t.Fatal("a group over a store queue and a file queue was accepted")
		}
		err = queue.Group(context.Background(), func(g *queue.GroupTx) error {
			return g.PutOnce(onFiles, layout.Pending, "task-1", item{ID: "task-1"})
		}, e.queue(layout.QEvents))
		if err == nil || onFiles.Exists(layout.Pending, "task-1") {
			t.Fatalf("a step on a queue outside the group's backend ran: %v", err)
		}
	})
}

func TestAdmitter_OnEveryBackendAdmitsAnIDOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		events := e.queue(layout.QEvents)
		a := queue.NewAdmitter(e.l, events)
		if a.Known("evt-1") || a.Seen("evt-1") {
			t.Fatal("known before it was admitted")
		}
		if err := a.Admit("evt-1", testEvent("evt-1")); err != nil {
			t.Fatal(err)
		}
		if !events.Exists(layout.Pending, "evt-1") {
			t.Fatal("not queued")
		}
		if err := a.Admit("evt-1", testEvent("evt-1")); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("second admit: %v, want ErrDuplicate", err)
		}
		// Handled and gone from the queue: still refused, still known.
		events.Move(layout.Pending, layout.Completed, "evt-1")
		events.Remove(layout.Completed, "evt-1")
		if err := a.Admit("evt-1", testEvent("evt-1")); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("admit after the event left the queue: %v", err)
		}
		if !a.Seen("evt-1") || !a.Known("evt-1") {
			t.Error("an admitted id is not seen")
		}
		// Another admitter (another process or host) refuses it too.
		other := queue.NewAdmitter(e.l, e.another(layout.QEvents, "host-b"))
		if err := other.Admit("evt-1", testEvent("evt-1")); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("admit through another admitter: %v", err)
		}
		errs := a.AdmitBatch([]string{"evt-1", "evt-2", "evt-2"}, []any{testEvent("evt-1"), testEvent("evt-2"), testEvent("evt-2")})
		if !errors.Is(errs[0], queue.ErrDuplicate) || errs[1] != nil || !errors.Is(errs[2], queue.ErrDuplicate) {
			t.Fatalf("AdmitBatch = %v, want duplicate, nil, duplicate", errs)
		}
		if got := events.Count(layout.Pending); got != 1 {
			t.Errorf("pending holds %d, want 1 (evt-2)", got)
		}
	})
}
