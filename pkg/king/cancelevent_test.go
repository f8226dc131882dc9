package king

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestControl_CancelEventRejectsAPendingEventNamingWho(t *testing.T) {
	f := newFixture(t, genPR)
	if rep := f.request(control.Request{Action: control.ActionPause, By: "alice"}); !rep.OK {
		t.Fatalf("pause %+v", rep)
	}
	f.event("evt-1", "github.pr.review_requested", "normal")
	rep := f.request(control.Request{Action: control.ActionCancelEvent, EventID: "evt-1", By: "bob@host"})
	if !rep.OK || rep.EventID != "evt-1" || !strings.Contains(rep.Message, "cancelled event evt-1") {
		t.Fatalf("cancel_event reply %+v", rep)
	}
	eqList(t, "events/pending", f.ids(layout.QEvents, layout.Pending))
	eqList(t, "events/rejected", f.ids(layout.QEvents, layout.Rejected), "evt-1")
	reason, err := os.ReadFile(filepath.Join(f.l.QueueState(layout.QEvents, layout.Rejected), "evt-1.json.reason"))
	if err != nil || !strings.Contains(string(reason), "cancelled by bob@host") {
		t.Errorf("reason %q, %v", reason, err)
	}
	if n := len(f.internal("event.cancelled")); n != 1 {
		t.Errorf("event.cancelled emitted %d times", n)
	}
	f.request(control.Request{Action: control.ActionResume, By: "alice"})
	f.tick()
	eqList(t, "tasks after resume", f.ids(layout.QTasks, layout.Pending))
}

func TestControl_CancelEventRefusesADispatchedOneNamingItsTask(t *testing.T) {
	f := newFixture(t, genPR)
	f.event("evt-1", "github.pr.review_requested", "normal")
	f.tick()
	tasks := f.ids(layout.QTasks, layout.Pending)
	if len(tasks) != 1 {
		t.Fatalf("tasks %v", tasks)
	}
	rep := f.request(control.Request{Action: control.ActionCancelEvent, EventID: "evt-1", By: "bob"})
	if rep.OK || !strings.Contains(rep.Message, "already dispatched as task "+tasks[0]) {
		t.Fatalf("cancel_event of a dispatched event %+v", rep)
	}
	eqList(t, "events/dispatched", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	if rep := f.request(control.Request{Action: control.ActionCancelEvent, EventID: "evt-nope", By: "bob"}); rep.OK || !strings.Contains(rep.Message, "no event evt-nope") {
		t.Fatalf("cancel_event of no event %+v", rep)
	}
}

func TestControl_CancelEventWithdrawsAPetitioningEvent(t *testing.T) {
	// A classifier was started for the event and has not answered.
	f := newFixture(t, genPR, genHerald)
	f.dm()
	if err := os.Rename(filepath.Join(f.l.QueueState(layout.QEvents, layout.Pending), dmID+".json"),
		filepath.Join(f.l.QueueState(layout.QEvents, layout.Petitioning), dmID+".json")); err != nil {
		t.Fatal(err)
	}
	writeJSONRaw(t, f.k.petitionPromptPath(dmID), "prompt")
	writeJSONRaw(t, f.k.petitionStartedPath(dmID), doc.FormatTime(t0)+"\n")
	f.newKing()
	rep := f.request(control.Request{Action: control.ActionCancelEvent, EventID: dmID, By: "carol"})
	if !rep.OK || !strings.Contains(rep.Message, "it was petitioning") {
		t.Fatalf("cancel_event of a petitioning event %+v", rep)
	}
	eqList(t, "events/rejected", f.ids(layout.QEvents, layout.Rejected), dmID)
	// The classifier's late answer (or its timeout) makes no task of it.
	f.clk.Advance(time.Minute)
	f.tick()
	eqList(t, "events/dispatched", f.ids(layout.QEvents, layout.Dispatched))
	eqList(t, "tasks", f.ids(layout.QTasks, layout.Pending))
}
