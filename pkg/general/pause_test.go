package general

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
)

// A pending task of a paused engine waits for the pause's end, even when it
// was queued before the pause (SPEC §10.8); a pause of another engine holds
// nothing.
func TestGeneral_PendingTasksWaitForTheirEnginesPause(t *testing.T) {
	now := time.Now()
	fc := clock.NewFake(now)
	e := newEnv(t, withClock(fc))
	e.start()
	pause := func(engine string, until time.Time) {
		t.Helper()
		if err := enginepause.Save(t.Context(), kv.OnStore(e.store()), enginepause.File{engine: {Until: doc.FormatTime(until), Reason: "limit"}}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(id string) bool {
		_, err := os.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.Pending), id+".json"))
		return err == nil
	}
	pause("claude", now.Add(time.Hour))
	e.task("task-20260101-070")
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !pending("task-20260101-070") {
		t.Fatal("a task of the paused engine started")
	}
	pause("codex", now.Add(time.Hour)) // only another engine is paused now
	e.scenario("", map[string]any{"mode": "success"})
	e.final("task-20260101-070")

	pause("claude", now.Add(time.Hour))
	e.task("task-20260101-071")
	if err := e.g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !pending("task-20260101-071") {
		t.Fatal("a task of the paused engine started")
	}
	fc.Advance(time.Hour + time.Second) // the pause ends
	e.final("task-20260101-071")
}

// A general the king's breaker parked claims only its canary: a retry or
// a task dispatched before the park waits in pending for the lift
// (SPEC §12.4).
func TestGeneral_ParkedGeneralClaimsOnlyItsCanary(t *testing.T) {
	e := newEnv(t)
	e.start()
	park := func(canary string) {
		t.Helper()
		p := parks.Park{Kind: parks.General, Name: e.m.Name, Since: time.Now(), Until: time.Now(), Canary: canary}
		if err := kv.PutJSON(t.Context(), kv.OnStore(e.store()), kv.NSParks, parks.Key(parks.General, e.m.Name), p); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(id string) bool {
		_, err := os.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.Pending), id+".json"))
		return err == nil
	}
	park("")
	e.task("task-20260101-080", func(t *doc.Task) { t.RetryCount = 1 })
	if err := e.g.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !pending("task-20260101-080") {
		t.Fatal("a retry of a parked general started")
	}
	park("task-20260101-081")
	e.scenario("", map[string]any{"mode": "success"})
	e.task("task-20260101-081")
	e.final("task-20260101-081")
	if !pending("task-20260101-080") {
		t.Fatal("the held retry started beside the canary")
	}
	if err := kv.OnStore(e.store()).Delete(t.Context(), kv.NSParks, parks.Key(parks.General, e.m.Name)); err != nil {
		t.Fatal(err)
	}
	e.final("task-20260101-080") // lifted: the held retry runs
}
