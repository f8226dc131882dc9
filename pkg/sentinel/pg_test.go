package sentinel_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgHost is one host of a PostgreSQL-mode kingdom: its own base dir (and
// inbox), the shared database.
type pgHost struct {
	*env
	st *pg.Store
	q  *queue.Queue // the shared events queue
}

func newPGHost(t *testing.T, dsn, host string) *pgHost {
	t.Helper()
	st, err := pg.Open(context.Background(), dsn, host)
	if err != nil {
		t.Fatal(err)
	}
	st.LeaseCheck = 20 * time.Millisecond
	t.Cleanup(func() { st.Close() })
	e := newEnv(t)
	return &pgHost{env: e, st: st, q: queue.OnStore(st, e.l, layout.QEvents, nil, host)}
}

func (h *pgHost) sentinel(cfg *config.Sentinel) *sentinel.Sentinel {
	h.t.Helper()
	s, err := sentinel.New(cfg, sentinel.Options{
		Layout: h.l, Clock: h.clk, Events: h.em,
		Log:    logging.New(logging.Options{Role: "sentinel", Stdout: h.logs, Level: -4}),
		Getenv: func(k string) string { return h.getenv[k] },
		Store:  h.st, Host: filepath.Base(h.l.Base),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

// The same external id dropped into the inboxes of two hosts is admitted
// once: the seen index is the database's.
func TestPG_InboxSameIDOnTwoHostsAdmittedOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := newPGHost(t, dsn, "host-a"), newPGHost(t, dsn, "host-b")
	sa, sb := a.sentinel(a.config(inboxYAML)), b.sentinel(b.config(inboxYAML))
	old := t0.Add(-5 * time.Second)
	body := `{"id":"evt-ci-build-91","type":"ci.build.failed","payload":{"build":91}}`
	pa := a.drop("build.json", body, old)
	pb := b.drop("same-build.json", body, old)

	a.tick(sa)
	b.tick(sb)

	ids, err := a.q.IDs(layout.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "evt-ci-build-91" {
		t.Fatalf("events pending in the store = %v, want [evt-ci-build-91]", ids)
	}
	if len(a.detected())+len(b.detected()) != 1 {
		t.Errorf("event.detected on host a %v, host b %v: want one in all", a.detected(), b.detected())
	}
	// Each host's inbox file is done with: queued on one, a duplicate on
	// the other.
	if exists(pa) || exists(pb) {
		t.Errorf("inbox files left: a %v, b %v", exists(pa), exists(pb))
	}
	// Nothing of the events queue is written under either base dir.
	for _, h := range []*pgHost{a, b} {
		if ents, _ := os.ReadDir(h.l.QueueState(layout.QEvents, layout.Pending)); len(ents) != 0 {
			t.Errorf("%s: events written to files: %v", h.l.Base, ents)
		}
	}
}

// Two hosts run the GitHub poller: only the holder of the pollers' lease
// polls; when it gives the lease up the other takes over, and what the
// first admitted stays admitted once.
func TestPG_GitHubPolledByOneHostAtATime(t *testing.T) {
	dsn := pgtest.DB(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	a, b := newPGHost(t, dsn, "host-a"), newPGHost(t, dsn, "host-b")
	sa, sb := a.sentinel(a.config(gh.yaml(""))), b.sentinel(b.config(gh.yaml("")))

	a.tick(sa)
	if gh.getCount() != 1 {
		t.Fatalf("after host a's tick: %d GETs, want 1", gh.getCount())
	}
	b.tick(sb)
	if gh.getCount() != 1 {
		t.Fatalf("host b polled while host a holds the lease: %d GETs", gh.getCount())
	}
	ids, _ := a.q.IDs(layout.Pending)
	if got := sorted(ids); got != fixtureIDs {
		t.Fatalf("pending = %s, want %s", got, fixtureIDs)
	}
	// Due again on both: still only the leader polls.
	a.clk.Advance(61 * time.Second)
	b.clk.Advance(61 * time.Second)
	b.tick(sb)
	a.tick(sa)
	b.tick(sb)
	if gh.getCount() != 2 {
		t.Fatalf("after a second round: %d GETs, want 2 (host a only)", gh.getCount())
	}

	// Host a stops; host b takes the lease at its next tick and polls
	// from its own (empty) poller state: every event is a duplicate.
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	b.tick(sb)
	if gh.getCount() != 3 {
		t.Fatalf("host b did not take the polling over: %d GETs", gh.getCount())
	}
	if h := gh.lastGet().Header.Get("If-None-Match"); h != "" {
		t.Errorf("host b's first poll sent host a's ETag %q", h)
	}
	ids, _ = b.q.IDs(layout.Pending)
	if got := sorted(ids); got != fixtureIDs {
		t.Fatalf("pending after the takeover = %s", got)
	}
	if n := len(a.detected()) + len(b.detected()); n != 4 {
		t.Errorf("event.detected lines on both hosts = %d, want 4", n)
	}
	// Now host a stands by.
	a.clk.Advance(61 * time.Second)
	a.tick(sa)
	if gh.getCount() != 3 {
		t.Errorf("host a polled without the lease: %d GETs", gh.getCount())
	}
}

// Losing the pollers' lease stops a poll in flight at once: the request
// is cancelled, nothing is admitted, and the other host polls next.
func TestPG_LostLeaseStopsPollAtOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	gh := newFakeGitHub(t, readFixture(t, "github/testdata/notifications.json"))
	a, b := newPGHost(t, dsn, "host-a"), newPGHost(t, dsn, "host-b")
	// The fake's request timeout (60 s) is well past the wait below: only
	// the lost lease can end the blocked request.
	yaml := gh.yaml("")
	sa, sb := a.sentinel(a.config(yaml)), b.sentinel(b.config(yaml))

	var blocked, cancelled atomic.Bool
	arrived, served := make(chan struct{}), make(chan struct{})
	gh.override = func(w http.ResponseWriter, r *http.Request) bool {
		if !blocked.CompareAndSwap(false, true) {
			return false
		}
		close(arrived)
		defer close(served)
		select {
		case <-r.Context().Done():
			cancelled.Store(true)
		case <-time.After(20 * time.Second):
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}
	done := make(chan error, 1)
	go func() { done <- sa.Tick(context.Background()) }()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("host a never polled")
	}
	terminatePollersLeader(t, b.st)
	killed := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("host a's tick: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("host a's poll did not stop when its lease was lost")
	}
	t.Logf("host a's poll stopped %v after its lease's backend was terminated", time.Since(killed).Round(time.Millisecond))
	select {
	case <-served: // the server sees the cancel a moment after the client
	case <-time.After(20 * time.Second):
	}
	if !cancelled.Load() {
		t.Error("host a's request was not cancelled")
	}
	if ids, _ := a.q.IDs(layout.Pending); len(ids) != 0 {
		t.Fatalf("admitted after the lease was lost: %v", ids)
	}
	b.tick(sb)
	if gh.getCount() != 2 {
		t.Fatalf("host b did not poll after host a lost the lease: %d GETs", gh.getCount())
	}
	ids, _ := b.q.IDs(layout.Pending)
	if got := sorted(ids); got != fixtureIDs {
		t.Fatalf("pending = %s, want %s", got, fixtureIDs)
	}
}

// terminatePollersLeader ends the backend holding the pollers' advisory
// lock, as the server does when the leading host dies.
func terminatePollersLeader(t *testing.T, st *pg.Store) {
	t.Helper()
	var pid int
	err := st.Pool().QueryRow(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype='advisory' AND objid=hashtext($1)::oid AND granted
		AND database=(SELECT oid FROM pg_database WHERE datname=current_database())`, sentinel.PollersLease).Scan(&pid)
	if err != nil {
		t.Fatalf("find the pollers' leader backend: %v", err)
	}
	if _, err := st.Pool().Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
}
