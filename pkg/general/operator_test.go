package general

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// While the operator's pause is on, a general claims nothing; once it is
// lifted the task runs.
func TestGeneral_PauseHoldsClaims(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	if err := atomicfile.WriteJSON(e.l.KingPaused(), control.Pause{Since: "2026-11-24T20:00:00Z", By: "op"}); err != nil {
		t.Fatal(err)
	}
	e.task("task-20260101-001")
	for i := 0; i < 3; i++ {
		if err := e.g.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !e.tasks().Exists(layout.Pending, "task-20260101-001") {
		t.Fatal("a task was claimed while paused")
	}
	os.Remove(e.l.KingPaused())
	if r := e.final("task-20260101-001"); r.Status != doc.ResultSuccess {
		t.Fatalf("after resume: %+v", r)
	}
}

// A successful Slack task of a general that keeps conversations keeps its
// workdir and records it; anything else does not.
func TestKeepConversation(t *testing.T) {
	dm := &doc.Task{ID: "task-20260101-001", Payload: map[string]any{"channel": "D1", "ts": "1.2"}}
	gh := &doc.Task{ID: "task-20260101-002", Payload: map[string]any{}}
	for _, c := range []struct {
		name     string
		manifest bool
		task     *doc.Task
		status   string
		asked    bool
		want     bool
	}{
		{"manifest, DM, success", true, dm, doc.ResultSuccess, false, true},
		{"agent asked, DM, success", false, dm, doc.ResultSuccess, true, true},
		{"no one asked", false, dm, doc.ResultSuccess, false, false},
		{"not from Slack", true, gh, doc.ResultSuccess, true, false},
		{"failed", true, dm, doc.ResultFailed, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &doc.Result{RawResult: doc.RawResult{Status: c.status, TrackConversation: c.asked}}
			keepConversation(c.manifest, c.task, r, "/w/repo")
			if r.TrackConversation != c.want || (r.Workdir == "/w/repo") != c.want {
				t.Errorf("track %v workdir %q, want %v", r.TrackConversation, r.Workdir, c.want)
			}
		})
	}
}

// A cancel that arrives while the general prepares the workspace (here: the
// clone waits for its per-repo lock) ends the attempt as Cancelled before
// any soldier starts: the agent never runs.
func TestGeneral_CancelDuringWorkspacePreparationLaunchesNothing(t *testing.T) {
	e := newEnv(t)
	withRepo(t, e)
	e.m.DefaultRepo = "acme/app"
	e.scenario("", map[string]any{"mode": "success"})
	e.start()
	const id = "task-20260101-001"
	clone := e.l.RepoClone(e.m.Name, "acme/app")
	if err := layout.EnsureDir(filepath.Dir(clone)); err != nil {
		t.Fatal(err)
	}
	lock, err := lockfile.Open(layout.CloneLock(clone))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := lock.Lock(); err != nil {
		t.Fatal(err)
	}
	e.task(id)
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !e.tasks().Exists(layout.InProgress, id) {
		t.Fatal("task not claimed")
	}
	// The king's side of `start task cancel` for a running task: the
	// record (in its file: the files store's shape).
	if err := layout.EnsureDir(e.l.KingCancelledDir()); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(e.l.KingCancelled(id), control.Cancelled{TaskID: id, Was: layout.InProgress, By: "op", At: doc.FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	lock.Unlock()
	r := e.final(id)
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonCancelled {
		t.Errorf("final = %s/%s, want failed/Cancelled", r.Status, r.ErrorReason)
	}
	if n := len(e.events("soldier.spawned")); n != 0 {
		t.Errorf("soldier.spawned emitted %d times for a cancelled task", n)
	}
	if calls, _ := os.ReadDir(filepath.Join(e.l.Base, "fake-calls")); len(calls) != 0 {
		t.Errorf("the engine ran %d times for a cancelled task", len(calls))
	}
	if es, _ := sessions.New(e.l).List(); len(es) != 0 {
		t.Errorf("sessions.json still lists %v", es)
	}
}
