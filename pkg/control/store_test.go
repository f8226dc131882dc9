package control

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestControl_Files(t *testing.T) { roundTrip(t, filesKV(t, layout.New(t.TempDir()))) }

func TestControl_Postgres(t *testing.T) {
	st, err := pg.Open(t.Context(), pgtest.DB(t), "host-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roundTrip(t, kv.OnStore(st))
}

// roundTrip walks a request, its answer, the pause and a cancel record
// through s, as start, the king and the generals do.
func roundTrip(t *testing.T, s kv.KV) {
	ctx := t.Context()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	a, err := Submit(ctx, s, Request{Action: ActionPause, By: "alice"}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Submit(ctx, s, Request{Action: ActionResume, By: "alice"}, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := Requests(ctx, s)
	if err != nil || len(qs) != 2 || qs[0].Key != a || qs[1].Key != b {
		t.Fatalf("requests %v, %v; want %s then %s", qs, err, a, b)
	}
	if err := Answer(ctx, s, a, Reply{ID: a, Action: ActionPause, OK: true, At: doc.FormatTime(now)}); err != nil {
		t.Fatal(err)
	}
	if qs, _ := Requests(ctx, s); len(qs) != 1 || qs[0].Key != b {
		t.Fatalf("after the answer: %v", qs)
	}
	rep, err := WaitReply(ctx, s, a, 0)
	if err != nil || !rep.OK || rep.ID != a {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	if _, err := WaitReply(ctx, s, a, 0); err != ErrNoReply {
		t.Fatalf("a reply read twice: %v", err)
	}

	// Replies nobody read are pruned once older than the cutoff.
	Answer(ctx, s, b, Reply{ID: b, OK: true, At: doc.FormatTime(now)})
	if err := PruneReplies(ctx, s, now); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.List(ctx, kv.NSReplies); len(m) != 1 {
		t.Fatalf("a reply answered at the cutoff was pruned: %v", m)
	}
	PruneReplies(ctx, s, now.Add(time.Second))
	if m, _ := s.List(ctx, kv.NSReplies); len(m) != 0 {
		t.Fatalf("an old reply was kept: %v", m)
	}

	if Paused(ctx, s) {
		t.Fatal("paused before any pause")
	}
	if err := WritePause(ctx, s, Pause{Since: doc.FormatTime(now), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPause(ctx, s); err != nil || p == nil || p.By != "alice" {
		t.Fatalf("pause %+v, %v", p, err)
	}
	for i, want := range []bool{true, false} {
		if was, err := LiftPause(ctx, s); err != nil || was != want {
			t.Fatalf("lift #%d: %v, %v; want %v", i, was, err, want)
		}
	}
	if Paused(ctx, s) {
		t.Fatal("still paused after the lift")
	}

	task := "task-20261121-001"
	if ReadCancelled(ctx, s, task) != nil {
		t.Fatal("a cancel record before any cancel")
	}
	if err := WriteCancelled(ctx, s, Cancelled{TaskID: task, Was: "pending", By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if c := ReadCancelled(ctx, s, task); c == nil || c.By != "alice" {
		t.Fatalf("cancel record %+v", c)
	}
	if all, err := CancelledTasks(ctx, s); err != nil || len(all) != 1 || all[task] == nil {
		t.Fatalf("cancelled tasks %v, %v", all, err)
	}
	if err := DropCancelled(ctx, s, task); err != nil || ReadCancelled(ctx, s, task) != nil {
		t.Fatalf("drop: %v", err)
	}
}

// filesKV is the key-value of a files store on l, closed with the test.
func filesKV(t *testing.T, l layout.Layout) kv.KV {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return kv.OnStore(st)
}
