package chamberlain

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// viewStore is a files store whose cluster view the test sets: its
// leaders, hosts and event-log horizon, or an unreachable database.
type viewStore struct {
	store.Store
	leaders map[string]store.LeaderInfo
	hosts   []store.Host
	horizon store.Horizon
	down    error
}

func (v *viewStore) Leaders(ctx context.Context) (map[string]store.LeaderInfo, error) {
	if v.down != nil {
		return nil, v.down
	}
	if v.leaders != nil {
		return v.leaders, nil
	}
	return v.Store.Leaders(ctx)
}

func (v *viewStore) Hosts(ctx context.Context, selfFence time.Duration) ([]store.Host, error) {
	if v.down != nil {
		return nil, v.down
	}
	if v.hosts != nil {
		return v.hosts, nil
	}
	return v.Store.Hosts(ctx, selfFence)
}

func (v *viewStore) EventHorizon(ctx context.Context) (store.Horizon, error) {
	if v.down != nil {
		return store.Horizon{}, v.down
	}
	return v.horizon, nil
}

func (e *env) viewRole(mode Mode, v *viewStore, host string) *Role {
	v.Store = e.st
	return e.roleWith(mode, Deps{Clock: e.clk, Metrics: e.met, Tmux: e.tm, Events: e.em, Store: v, Host: host})
}

// hungCore gives sentinel, king, envoy and chamberlain live sessions whose
// heartbeats are five minutes old, and sets the clock there.
func (e *env) hungCore() {
	e.t.Helper()
	var last time.Time
	for _, n := range []string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy, layout.RoleChamberlain} {
		s := e.newSession(n)
		setMtime(e.t, e.l.Heartbeat(n), s.Created)
		last = s.Created
	}
	e.clk.Set(last.Add(5 * time.Minute))
}

func problemsOf(v Verdict) string {
	var ps []string
	for _, p := range v.Problems {
		ps = append(ps, p.String())
	}
	return strings.Join(ps, "; ")
}

// SPEC §12.2: a role whose outage record explains its silence is named
// "store unreachable since <time>: <error>" (exit 2), never "down" or
// hung, and the daemon does not kill it.
func TestVerdict_OutageRecordNamesTheStoreNotKingDown(t *testing.T) {
	e := newEnv(t, time.Now())
	e.hungCore()
	since := e.clk.Now().Add(-4 * time.Minute).UTC().Truncate(time.Second)
	rec := fmt.Sprintf(`{"since":%q,"error":"dial tcp 10.0.0.5:5432: connect: connection refused"}`, since.Format(time.RFC3339))
	for _, n := range []string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy, layout.RoleChamberlain} {
		if err := os.WriteFile(e.l.StoreUnreachable(n), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := e.role(ModeDaemon)
	e.tick(r)
	v := r.Last.Verdict()
	got := problemsOf(v)
	want := "king store unreachable since " + since.In(time.Local).Format("2006-01-02 15:04:05 MST") + ": dial tcp 10.0.0.5:5432: connect: connection refused"
	if v.Exit != VerdictDown || !strings.Contains(got, want) || strings.Contains(got, "down") {
		t.Fatalf("verdict %d %q, want exit 2 naming %q and no role down", v.Exit, got, want)
	}
	for _, n := range []string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy} {
		if !e.alive(n) {
			t.Errorf("%s, waiting for the store, was killed as hung", n)
		}
	}
	if hm := e.events("system.heartbeat_missed"); len(hm) != 0 {
		t.Errorf("heartbeat_missed for roles waiting for the store: %v", hm)
	}
	var table strings.Builder
	r.Last.Table(&table)
	if !strings.Contains(table.String(), "store unreachable since") {
		t.Errorf("table does not name the outage:\n%s", table.String())
	}
}

// When the check itself cannot reach the store it says so the same way,
// reads nothing else from it, and judges no live role down for its
// silence.
func TestVerdict_OwnStoreErrorsNameTheStore(t *testing.T) {
	e := newEnv(t, time.Now())
	e.hungCore()
	v := &viewStore{down: fmt.Errorf("connect: %w", store.ErrUnreachable)}
	r := e.viewRole(ModeOnce, v, "host-a")
	err := r.Tick(context.Background())
	if !store.Unreachable(err) {
		t.Fatalf("tick: %v, want the store's unreachable error (the runner waits it out)", err)
	}
	verdict := r.Last.Verdict()
	got := problemsOf(verdict)
	if verdict.Exit != VerdictDown || !strings.Contains(got, "store store unreachable since ") || !strings.Contains(got, "store unreachable") ||
		strings.Contains(got, "down") {
		t.Fatalf("verdict %d %q, want exit 2 naming the store and no role down", verdict.Exit, got)
	}
	for _, ro := range r.Last.Roles {
		if ro.Name == layout.RoleKing && !strings.HasPrefix(r.Last.RoleState(ro), "waiting for the store (store unreachable since") {
			t.Errorf("king's state %q", r.Last.RoleState(ro))
		}
	}
}

// A leader role whose lease a live session on another host holds stands
// by here: "standby (leader on <host>)", not down, not killed as hung.
func TestVerdict_StandbyLeaderIsNotDown(t *testing.T) {
	e := newEnv(t, time.Now())
	e.hungCore()
	for _, n := range []string{layout.RoleSentinel, layout.RoleChamberlain} {
		setMtime(t, e.l.Heartbeat(n), e.clk.Now())
	}
	v := &viewStore{leaders: map[string]store.LeaderInfo{
		layout.RoleKing:  {Holder: "host-b", Epoch: 3, Held: true},
		layout.RoleEnvoy: {Holder: "host-a", Epoch: 2, Held: true}, // this host led it once: its silence is a fault
	}}
	r := e.viewRole(ModeDaemon, v, "host-a")
	e.tick(r)
	verdict := r.Last.Verdict()
	got := problemsOf(verdict)
	if strings.Contains(got, "king") || !strings.Contains(got, "envoy down") {
		t.Fatalf("verdict %q: want the standby king fine and the hung envoy down", got)
	}
	for _, ro := range r.Last.Roles {
		if ro.Name == layout.RoleKing && r.Last.RoleState(ro) != "standby (leader on host-b)" {
			t.Errorf("king's state %q, want standby (leader on host-b)", r.Last.RoleState(ro))
		}
	}
	if !e.alive(layout.RoleKing) {
		t.Error("the standby king was killed as hung")
	}
}

// On PostgreSQL: host-b leads the king; host-a's chamberlain sees its own
// king standing by, not down.
func TestVerdict_PG_StandbyKingOnAnotherHost(t *testing.T) {
	dsn := pgtest.DB(t)
	ctx := context.Background()
	b, err := pg.Open(ctx, dsn, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lease, err := b.Lead(ctx, layout.RoleKing)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	a := newPGHost(t, dsn, "host-a", time.Now())
	a.env.hungCore()
	a.r.Close()
	r := a.env.roleWith(ModeReadOnly, Deps{Clock: a.clk, Metrics: a.met, Tmux: a.tm, Store: a.st, Host: "host-a"})
	if err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got := problemsOf(r.Last.Verdict())
	if strings.Contains(got, "king") {
		t.Fatalf("verdict %q names the standby king", got)
	}
	for _, ro := range r.Last.Roles {
		if ro.Name == layout.RoleKing && r.Last.RoleState(ro) != "standby (leader on host-b)" {
			t.Errorf("king's state %q", r.Last.RoleState(ro))
		}
	}
}

// A host silent past takeover_seconds is a problem until it is forgotten;
// one silent for less is not yet.
func TestVerdict_LostHostUntilForgotten(t *testing.T) {
	e := newEnv(t, time.Now())
	e.cfg.SelfFence, e.cfg.Takeover = 300*time.Second, 600*time.Second
	now := e.clk.Now()
	v := &viewStore{hosts: []store.Host{
		{ID: "host-a", Alive: true, Age: time.Second, ListedAt: now},
		{ID: "host-b", Alive: false, Age: 700 * time.Second, ListedAt: now},
		{ID: "host-c", Alive: false, Age: 400 * time.Second, ListedAt: now},
	}}
	r := e.viewRole(ModeReadOnly, v, "host-a")
	r.Tick(context.Background())
	got := problemsOf(r.Last.Verdict())
	want := "host host-b lost since " + now.Add(-700*time.Second).In(time.Local).Format("2006-01-02 15:04:05 MST") +
		"; `start hosts forget host-b` once it is retired"
	if !strings.Contains(got, want) || strings.Contains(got, "host-c") || strings.Contains(got, "host-a") {
		t.Fatalf("verdict %q, want it to name %q only", got, want)
	}
	if r.Last.Verdict().Exit < VerdictDegraded {
		t.Fatalf("exit %d with a lost host", r.Last.Verdict().Exit)
	}
	v.hosts = v.hosts[:1] // forgotten
	r.Tick(context.Background())
	if got := problemsOf(r.Last.Verdict()); strings.Contains(got, "host-b") {
		t.Fatalf("a forgotten host still named: %q", got)
	}
}

// An event log held back for minutes by an open transaction is a warning
// naming it; a moment's hold is the normal churn of a busy server.
func TestVerdict_EventLogHeldBackByAnOpenTransaction(t *testing.T) {
	e := newEnv(t, time.Now())
	began := e.clk.Now().Add(-10 * time.Minute)
	v := &viewStore{horizon: store.Horizon{Held: 4, HeldFor: 5 * time.Minute, Oldest: "xid 812, pid 4242, database other", Since: began}}
	r := e.viewRole(ModeReadOnly, v, "host-a")
	r.Tick(context.Background())
	verdict := r.Last.Verdict()
	got := problemsOf(verdict)
	want := "event log held back by an open transaction since " + began.In(time.Local).Format("2006-01-02 15:04:05 MST") + " (xid 812, pid 4242, database other)"
	if !strings.Contains(got, want) || verdict.Exit < VerdictDegraded {
		t.Fatalf("verdict %d %q, want it to name %q", verdict.Exit, got, want)
	}
	v.horizon.HeldFor = 20 * time.Second
	r.Tick(context.Background())
	if got := problemsOf(r.Last.Verdict()); strings.Contains(got, "event log") {
		t.Fatalf("a moment's hold named: %q", got)
	}
}
