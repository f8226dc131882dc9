package chamberlain

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// A registry that lost a live soldier without becoming unreadable (here:
// truncated to zero bytes, which decodes as no entries) must not get that
// soldier killed as an orphan: its in-progress task names it in
// <task>-soldier-id, so the chamberlain re-registers it. A soldier session
// no task names is still an orphan.
func TestSessions_LiveSoldierOfInProgressTaskIsReRegisteredNotKilled(t *testing.T) {
	e := newEnv(t, time.Now())
	const task = "task-20261121-001"
	live := e.newSession("soldier-1-live")
	e.newSession("soldier-2-orphan")
	tk := doc.Task{ID: task, EventID: "evt-inbox-x", TargetGeneral: "gen-pr", Type: "test.run", Payload: map[string]any{},
		Priority: "normal", CreatedAt: doc.FormatTime(live.Created), Status: doc.TaskInProgress}
	if err := e.queue(layout.QTasks).Put(layout.InProgress, task, tk); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.l.ResultSoldierID(task), "soldier-1-live\n")
	reg := sessions.New(e.l)
	if err := reg.Add(sessions.Entry{ID: "soldier-1-live", TaskID: task, General: "gen-pr", StartedAt: live.Created}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.l.SessionsJSON(), 0); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeOnce, ModeDaemon} {
		e.clk.Set(live.Created.Add(11 * time.Minute)) // past the 10 min orphan grace
		e.tick(e.role(mode))
	}
	if !e.alive("soldier-1-live") {
		t.Fatal("the live soldier of an in-progress task was killed as an orphan")
	}
	if e.alive("soldier-2-orphan") {
		t.Error("a soldier no task names survived")
	}
	got, err := reg.Read()
	if err != nil || len(got) != 1 || got[0].ID != "soldier-1-live" || got[0].TaskID != task || got[0].General != "gen-pr" {
		t.Errorf("registry = %+v (%v), want the live soldier re-registered", got, err)
	}
	for _, ev := range e.events("recovery.session_killed") {
		if dataOf(t, ev)["soldier_id"] == "soldier-1-live" {
			t.Error("recovery.session_killed for the live soldier")
		}
	}
}
