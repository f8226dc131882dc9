package chamberlain

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgHost is one host of a cluster: its own base dir, tmux and clock, the
// shared database.
type pgHost struct {
	*env
	st *pg.Store
	r  *Role
}

func newPGHost(t *testing.T, dsn, host string, start time.Time) *pgHost {
	t.Helper()
	st, err := pg.Open(context.Background(), dsn, host)
	if err != nil {
		t.Fatal(err)
	}
	st.LeaseCheck = 50 * time.Millisecond
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, start)
	em := eventlog.NewStoreEmitter(st, "chamberlain")
	r := e.roleWith(ModeDaemon, Deps{Clock: e.clk, Metrics: e.met, Tmux: e.tm, Events: em, Store: st, Host: host})
	return &pgHost{env: e, st: st, r: r}
}

// alertsOf lists the pending chamberlain messages of kind in the store.
func alertsOf(t *testing.T, st store.Store, kind string) []store.Doc {
	t.Helper()
	docs, err := st.List(context.Background(), layout.QMessages, layout.Pending)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Doc
	for _, d := range docs {
		if strings.HasPrefix(d.ID, "msg-chamberlain-"+kind+"-") {
			out = append(out, d)
		}
	}
	return out
}

func TestChamberlain_PG_OneHostAlertsForTheCluster(t *testing.T) {
	dsn := pgtest.DB(t)
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	a := newPGHost(t, dsn, "host-a", start)
	// Clocks apart, so two hosts' alerts could not share an id by chance.
	b := newPGHost(t, dsn, "host-b", start.Add(7*time.Second))

	gen := eventlog.NewStoreEmitter(a.st, "gen-x")
	for i := 0; i < 3; i++ {
		if err := gen.Emit("task.failed", map[string]any{"task_id": "task-20260304-00" + string(rune('1'+i)), "general": "gen-x"}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 3; round++ {
		a.tick(a.r)
		b.tick(b.r)
		a.clk.Advance(30 * time.Second)
		b.clk.Advance(30 * time.Second)
	}
	if got := alertsOf(t, a.st, KindFailures); len(got) != 1 {
		t.Fatalf("failure-streak alerts = %d, want 1 (one leader for the cluster): %v", len(got), got)
	}
	if a.r.lease == nil || b.r.lease != nil {
		t.Errorf("cluster lease: host-a %v, host-b %v; want host-a only (it ticked first)", a.r.lease != nil, b.r.lease != nil)
	}
	for _, h := range []*pgHost{a, b} {
		if _, err := os.Stat(h.l.Resources()); err != nil {
			t.Errorf("%s: resources.json not written: %v", h.r.host, err)
		}
	}

	// host-a stops: host-b takes the cluster duties and resumes the event
	// log at the cursor host-a saved in the store, so the failures it
	// already alerted on are not counted (or alerted) again.
	if err := a.r.Close(); err != nil {
		t.Fatal(err)
	}
	b.tick(b.r)
	if b.r.lease == nil {
		t.Fatal("host-b did not take the cluster duties after host-a released them")
	}
	if n := b.r.anomaly.Consecutive["gen-x"]; n != 0 {
		t.Errorf("host-b re-read the event log: gen-x streak %d, want 0", n)
	}
	if err := gen.Emit("task.failed", map[string]any{"task_id": "task-20260304-009", "general": "gen-x"}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(30 * time.Second)
	b.tick(b.r)
	if n := b.r.anomaly.Consecutive["gen-x"]; n != 1 {
		t.Errorf("host-b after a new failure: gen-x streak %d, want 1", n)
	}
	if got := alertsOf(t, b.st, KindFailures); len(got) != 1 {
		t.Errorf("failure-streak alerts after failover = %d, want still 1", len(got))
	}
}

func TestChamberlain_PG_PerHostAlertsNameTheirHost(t *testing.T) {
	dsn := pgtest.DB(t)
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	a := newPGHost(t, dsn, "host-a", start)
	b := newPGHost(t, dsn, "host-b", start)
	a.met.set(10, 10, 99)
	b.met.set(10, 10, 99)
	a.tick(a.r)
	b.tick(b.r)
	got := alertsOf(t, a.st, KindDisk)
	if len(got) != 2 {
		t.Fatalf("disk alerts = %d, want one per host", len(got))
	}
	for i, host := range []string{"host-a", "host-b"} {
		if !strings.Contains(got[i].ID, host) || !strings.Contains(string(got[i].Data), "["+host+"]") {
			t.Errorf("alert %s does not name %s: %s", got[i].ID, host, got[i].Data)
		}
	}
}

// In PostgreSQL the event log's retention deletes the rows older than
// retention.logs_days (store.TrimEvents); younger rows stay readable.
func TestChamberlain_PG_TrimEventsDeletesOldRows(t *testing.T) {
	dsn := pgtest.DB(t)
	h := newPGHost(t, dsn, "host-a", time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	ctx := t.Context()
	for _, typ := range []string{"x.old", "x.old"} {
		if err := h.st.Emit(ctx, typ, "king", nil); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing is older than a day yet.
	if n, err := h.st.TrimEvents(ctx, time.Now(), 24*time.Hour); err != nil || n != 0 {
		t.Fatalf("trim of young rows = %d, %v; want 0", n, err)
	}
	// Seen from two days on, both rows are past a one-day retention.
	if n, err := h.st.TrimEvents(ctx, time.Now().Add(48*time.Hour), 24*time.Hour); err != nil || n != 2 {
		t.Fatalf("trim of old rows = %d, %v; want 2", n, err)
	}
	if err := h.st.Emit(ctx, "x.new", "king", nil); err != nil {
		t.Fatal(err)
	}
	evs, err := h.st.Events(ctx, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "x.new" {
		t.Fatalf("events after the trim = %+v, %v; want x.new alone", evs, err)
	}
}
