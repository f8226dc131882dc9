package chamberlain

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func readStats(t *testing.T, e *env) report.Stats {
	t.Helper()
	b, err := os.ReadFile(e.l.StatsJSON())
	if err != nil {
		t.Fatal(err)
	}
	var s report.Stats
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEvents_CorruptLinesSkippedAlone(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	f, err := os.OpenFile(e.l.EventsLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"task.completed", "task.failed", "soldier.spawned", "soldier.timeout", "task.created"}
	var durSum, durN float64
	for i := 0; i < 1000; i++ { // 1,000 lines, 10 of them corrupt
		if i%100 == 50 {
			fmt.Fprintf(f, "{\"ts\":\"2026-11-21T11:00:00Z\",\"type\":\"task.comp\n") // a torn line
			continue
		}
		typ := types[i%len(types)]
		if typ == "task.completed" {
			durSum += float64(10 + i%3*10)
			durN++
		}
		fmt.Fprintf(f, `{"ts":"2026-11-21T11:00:00Z","type":%q,"actor":"gen-pr","data":{"task_id":"task-%d","duration_seconds":%d}}`+"\n", typ, i, 10+i%3*10)
	}
	f.Close()
	r := e.role(ModeDaemon)
	e.tick(r)
	s := readStats(t, e)
	// The store's reader skips a torn line alone; it does not tell the
	// chamberlain how many it skipped (corrupt_lines stays 0).
	if s.Events != 990 {
		t.Fatalf("events %d, want 990", s.Events)
	}
	if s.Totals.TaskCompleted != 190 || s.Totals.TaskFailed != 200 || s.Totals.SoldierSpawned != 200 || s.Totals.SoldierTimeout != 200 {
		t.Fatalf("totals = %+v", s.Totals)
	}
	g := s.Generals["gen-pr"]
	if g == nil || g.Completed != 190 || g.Failed != 200 || g.DurationCount != 190 || g.AvgDurationSeconds != round1(durSum/durN) {
		t.Fatalf("gen-pr stats = %+v", g)
	}
	// The cursor is saved in the store: past the last line of events.log.
	fi, _ := os.Stat(e.l.EventsLog())
	var pos struct {
		Offset int64 `json:"offset"`
	}
	b, err := e.st.Value(t.Context(), eventlog.NSCursors, ClusterLease)
	if err == nil {
		err = json.Unmarshal(b, &pos)
	}
	if err != nil || pos.Offset != fi.Size() {
		t.Fatalf("cursor = %+v (%v), want offset %d", pos, err, fi.Size())
	}
	// A restarted chamberlain resumes at the cursor: nothing counted twice.
	r.Close()
	r2 := e.role(ModeDaemon)
	e.clk.Advance(30 * time.Second)
	e.tick(r2)
	if s2 := readStats(t, e); s2.Events != 990 {
		t.Fatalf("after restart events = %d, want 990", s2.Events)
	}
}

func TestEvents_ConsecutiveFailuresAcrossTicks(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	fail := func(gen string) { e.emitAs("task.failed", gen, map[string]any{"task_id": "t", "error": "x"}) }
	fail("gen-pr")
	fail("gen-pr")
	fail("gen-ops")
	e.tick(r)
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alert after 2 failures: %d", n)
	}
	e.clk.Advance(30 * time.Second)
	fail("gen-pr")
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "gen-pr failed 3 tasks in a row") {
		t.Fatalf("messages = %+v", ms)
	}
	// A success ends the streak: recovered note, and the count restarts.
	e.clk.Advance(30 * time.Second)
	e.emitAs("task.completed", "gen-pr", map[string]any{"task_id": "t", "duration_seconds": 5})
	fail("gen-pr")
	fail("gen-pr")
	e.tick(r)
	if n := len(e.messages()); n != 1 {
		t.Fatalf("messages = %d right after the success, want 1 (recovered waits RecoverAfter)", n)
	}
	e.clk.Advance(RecoverAfter)
	e.tick(r)
	if n := len(e.messages()); n != 2 {
		t.Fatalf("messages = %d, want 2 (alert + recovered)", n)
	}
}

func TestEvents_SuccessBetweenFailuresResets(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	for _, typ := range []string{"task.failed", "task.failed", "task.completed", "task.failed", "task.failed"} {
		e.emitAs(typ, "gen-pr", map[string]any{"task_id": "t"})
	}
	e.tick(r)
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alerted on non-consecutive failures: %d", n)
	}
	if r.anomaly.Consecutive["gen-pr"] != 2 {
		t.Fatalf("streak = %d, want 2", r.anomaly.Consecutive["gen-pr"])
	}
}

func TestEvents_TimeoutSpikeInSlidingHour(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	for i := 0; i < 4; i++ {
		e.emitAs("soldier.timeout", "gen-pr", map[string]any{"task_id": "t"})
		e.clk.Advance(10 * time.Minute)
	}
	e.tick(r) // 4 in the hour
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alert with 4 timeouts: %d", n)
	}
	e.emitAs("soldier.timeout", "gen-pr", map[string]any{"task_id": "t"})
	e.tick(r) // 5 within 40 minutes
	if n := len(e.messages()); n != 1 {
		t.Fatalf("messages = %d, want 1", n)
	}
	e.clk.Advance(25 * time.Minute) // the first timeout leaves the window
	e.tick(r)
	e.clk.Advance(RecoverAfter) // and stays clear
	e.tick(r)
	if n := len(e.messages()); n != 2 {
		t.Fatalf("messages = %d, want 2 (alert + recovered)", n)
	}
}

func TestEvents_StaleEventWarnedOnce(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	eq := e.queue(layout.QEvents)
	for _, id := range []string{"evt-inbox-a-1", "evt-inbox-b-1"} {
		if err := eq.Put(layout.Pending, id, doc.Event{ID: id, Type: "x", Source: "inbox", Priority: "normal",
			CreatedAt: doc.FormatTime(e.clk.Now()), Status: "pending"}); err != nil {
			t.Fatal(err)
		}
		e.emitAs("event.detected", "sentinel", map[string]any{"event_id": id, "source": "inbox", "event_type": "x"})
	}
	r := e.role(ModeDaemon)
	e.tick(r)
	e.clk.Advance(10 * time.Minute)
	e.emitAs("event.dispatched", "king", map[string]any{"event_id": "evt-inbox-b-1", "task_id": "task-20261121-001"})
	e.clk.Advance(19 * time.Minute)
	e.tick(r)
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alert before 30 minutes: %d", n)
	}
	e.clk.Advance(2 * time.Minute)
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "evt-inbox-a-1") {
		t.Fatalf("messages = %+v", ms)
	}
	for i := 0; i < 5; i++ {
		e.clk.Advance(30 * time.Minute)
		e.tick(r)
	}
	if n := len(e.messages()); n != 1 {
		t.Fatalf("stale event alerted %d times, want once", n)
	}
	// Once the king moves it on, it is forgotten.
	if err := eq.Move(layout.Pending, layout.Dispatched, "evt-inbox-a-1"); err != nil {
		t.Fatal(err)
	}
	e.tick(r)
	if len(r.anomaly.Detected) != 0 {
		t.Fatalf("detected = %v, want empty", r.anomaly.Detected)
	}
}

// TestHelperEmitter is not a test: run as a child process, it appends
// KINGDOM_HELPER_N events to the events.log of KINGDOM_HELPER_BASE.
func TestHelperEmitter(t *testing.T) {
	base := os.Getenv("KINGDOM_HELPER_BASE")
	if base == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("KINGDOM_HELPER_N"))
	l := layout.New(base)
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "gen-test", nil)
	for i := 0; i < n; i++ {
		if err := em.Emit("test.seq", map[string]int{"seq": i}); err != nil {
			t.Fatal(err)
		}
	}
	em.Close()
}

func TestEvents_DailySplitWhileAnotherProcessEmits(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 0, 5, 0, 0, time.Local))
	const total = 10000
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEmitter$")
	cmd.Env = append(os.Environ(), "KINGDOM_HELPER_BASE="+e.l.Base, "KINGDOM_HELPER_N="+strconv.Itoa(total))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r := e.role(ModeOnce) // consumption only; splits are driven by hand below
	splits := 0
	seenSplit := map[string]bool{}
	finished := false
	for !finished {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("emitter: %v", err)
			}
			finished = true
		default:
		}
		if err := r.consume(t.Context()); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(e.l.EventsLog()); err == nil && fi.Size() > 0 && splits < 5 && r.stats.Events > int64(splits+1)*1000 {
			// The split is the store's (store.TrimEvents), taken while
			// the emitter appends and the reader is behind.
			if _, err := e.st.TrimEvents(t.Context(), e.clk.Now(), 30*24*time.Hour); err != nil {
				t.Fatal(err)
			}
			splits++
			e.clk.Advance(24 * time.Hour)
			seenSplit[e.clk.Now().Format("20060102")] = true
		}
	}
	if err := r.consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.stats.Events != total {
		t.Fatalf("consumed %d events, want %d (splits: %d)", r.stats.Events, total, splits)
	}
	if splits == 0 {
		t.Fatal("no split happened during the run")
	}
	// Every line is in exactly one file.
	var lines int
	files, _ := os.ReadDir(e.l.LogsDir())
	for _, f := range files {
		if strings.HasPrefix(f.Name(), "events") {
			b, _ := os.ReadFile(e.l.LogsDir() + "/" + f.Name())
			lines += strings.Count(string(b), "\n")
		}
	}
	if lines != total {
		t.Fatalf("%d lines on disk, want %d", lines, total)
	}
	t.Logf("%d splits during %d events", splits, total)
}

func TestEvents_ManyStaleEventsShareOneMessage(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	eq := e.queue(layout.QEvents)
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("evt-inbox-held-%02d", i)
		if err := eq.Put(layout.Pending, id, doc.Event{ID: id, Type: "x", Source: "inbox", Priority: "low",
			CreatedAt: doc.FormatTime(e.clk.Now()), Status: "pending"}); err != nil {
			t.Fatal(err)
		}
		e.emitAs("event.detected", "sentinel", map[string]any{"event_id": id, "source": "inbox", "event_type": "x"})
	}
	r := e.role(ModeDaemon)
	e.tick(r)
	e.clk.Advance(31 * time.Minute)
	e.tick(r)
	e.clk.Advance(31 * time.Minute)
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "40 events") || !strings.Contains(ms[0].Content, "and 30 more") {
		t.Fatalf("40 held events produced %d messages: %+v", len(ms), ms)
	}
}

func TestEvents_UnwritableResultsAlertOnceUntilWritable(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	e.emitAs("general.results_unwritable", "gen-pr", map[string]any{"task_id": "t", "stranded": 1, "error": "write state/results: no space left on device"})
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "gen-pr cannot write task results") || !strings.Contains(ms[0].Content, "no space left") {
		t.Fatalf("messages = %+v", ms)
	}
	e.clk.Advance(30 * time.Second)
	e.tick(r)
	if n := len(e.messages()); n != 1 {
		t.Fatalf("messages = %d on the next tick, want 1 (alert once)", n)
	}
	e.emitAs("general.results_writable", "gen-pr", map[string]any{})
	e.clk.Advance(RecoverAfter)
	e.tick(r)
	e.clk.Advance(RecoverAfter)
	e.tick(r)
	ms = e.messages()
	if len(ms) != 2 || !strings.Contains(ms[0].Content+ms[1].Content, "Recovered: [urgent] gen-pr cannot write") {
		t.Fatalf("messages = %+v, want the alert and its recovered note", ms)
	}
}
