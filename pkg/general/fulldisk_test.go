package general

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// fullResultsDir mounts a small tmpfs on state/results (unmounted at the
// end of the test) and returns a function that fills it up and one that
// frees it again.
func fullResultsDir(t *testing.T, e *env) (fill, free func()) {
	t.Helper()
	dir := e.l.ResultsDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	filler := filepath.Join(dir, ".filler")
	fill = func() {
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		for {
			if _, err := f.Write(buf[:1]); err != nil {
				return
			}
		}
	}
	free = func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	return fill, free
}

// A finished attempt whose final result cannot be written (a full disk)
// is finished at the first tick after space comes back — from its raw
// result, without running its agent again — not at the next periodic
// reconcile; while the write fails, the general says so once.
func TestGeneral_FullDiskFinalResultIsRetriedNextTick(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	fill, free := fullResultsDir(t, e)
	const id = "task-20260101-300"
	e.claimed(id, func(tk *doc.Task) { tk.Status = doc.TaskInProgress })
	os.WriteFile(e.l.ResultRaw(id), []byte(`{"task_id":"`+id+`","status":"success","summary":"done before the disk filled"}`), 0o600)
	fill()
	g := e.start()
	for i := 0; i < 3; i++ {
		if err := g.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		g.Wait()
	}
	if _, err := os.Stat(e.l.ResultFinal(id)); err == nil {
		t.Fatal("a final result was written on a full disk")
	}
	if n := len(e.events("general.results_unwritable")); n != 1 {
		t.Errorf("general.results_unwritable emitted %d times over 3 failing ticks, want 1", n)
	}
	free()
	// The same instant: no periodic reconcile is due.
	if err := g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Wait()
	b, err := os.ReadFile(e.l.ResultFinal(id))
	if err != nil {
		t.Fatalf("no final result at the first tick after space came back: %v", err)
	}
	r, err := schema.DecodeResult(b)
	if err != nil || r.Status != doc.ResultSuccess || r.Summary != "done before the disk filled" {
		t.Errorf("final = %+v (%v), want the raw result's success", r, err)
	}
	if n := len(e.events("soldier.spawned")); n != 0 {
		t.Errorf("the agent ran again (%d soldiers)", n)
	}
	if n := len(e.events("general.results_writable")); n != 1 {
		t.Errorf("general.results_writable emitted %d times, want 1", n)
	}
}

// A soldier that dies while the disk is full cannot get its synthetic
// SoldierDied raw result; the general keeps it and writes it once it can,
// so the attempt ends as the retryable SoldierDied, never as a terminal
// InvalidResult for a raw result that "does not exist".
func TestGeneral_FullDiskSoldierDeathIsKeptUntilWritable(t *testing.T) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, withClock(fc))
	fill, free := fullResultsDir(t, e)
	e.scenario("", map[string]any{"mode": "hang"})
	g := e.start()
	const id = "task-20260101-301"
	e.task(id)
	e.tickUntil("the soldier", func() bool { return sessionOf(e, id) != "" })
	fill()
	if err := tmuxC.Kill(context.Background(), sessionOf(e, id)); err != nil {
		t.Fatal(err)
	}
	e.tickUntil("the write failure", func() bool { return len(e.events("general.results_unwritable")) == 1 })
	g.Wait()
	if _, err := os.Stat(e.l.ResultFinal(id)); err == nil {
		t.Fatal("a final result was written on a full disk")
	}
	free()
	r := e.final(id)
	if r.Status != doc.ResultKilled || r.ErrorReason != doc.ReasonSoldierDied {
		t.Errorf("final = %s/%s, want killed/SoldierDied", r.Status, r.ErrorReason)
	}
}
