package operator

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func problemsOf(v Verdict) string {
	var b strings.Builder
	for _, p := range v.Problems {
		b.WriteString(p.Role + p.Check + ": " + p.Reason + "\n")
	}
	return b.String()
}

func TestReadCluster_HostsAndLeadersFromPostgres(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t))
	t.Setenv(config.HostIDEnv, "box-a")
	ctx := context.Background()
	l := layout.New(t.TempDir())
	l.Ensure()
	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv = config.StorePostgres, "KINGDOM_TEST_DSN"
	a, err := open.Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	t.Setenv(config.HostIDEnv, "box-b")
	b, err := open.Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Setenv(config.HostIDEnv, "box-a")
	inner, _ := app.OpenStore(ctx, a)
	pool, _ := open.Pool(inner)
	reg := inner
	reg.RenewHost(ctx, "box-a", "v2", time.Now())
	reg.RenewHost(ctx, "box-b", "v1", time.Now())
	// box-b went silent an hour ago.
	if _, err := pool.Exec(ctx, "UPDATE hosts SET renewed_at = now() - interval '1 hour' WHERE host_id='box-b'"); err != nil {
		t.Fatal(err)
	}
	lk, err := b.Lead(ctx, layout.RoleKing)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()

	sh := StoreShared(l, inner)
	sh.Config = cfg
	c := ReadCluster(ctx, sh.Store, sh.Config)
	if c == nil || c.Err != nil || c.HostID != "box-a" {
		t.Fatalf("cluster %+v", c)
	}
	st := &Status{Threshold: time.Minute, Cluster: c, Kingdom: Kingdom{StartPID: 1, Roles: []RoleStatus{
		// Standing by beside box-b's king: alive, never ticked.
		{Name: layout.RoleKing, SessionAlive: true, HeartbeatAge: -1, SinceSession: time.Hour},
		{Name: layout.RoleEnvoy, SessionAlive: true, HeartbeatAge: time.Second, SinceSession: time.Hour},
	}}}
	v := st.Verdict()
	ps := problemsOf(v)
	if strings.Contains(ps, "king") {
		t.Errorf("a standby king beside box-b's leader reported: %s", ps)
	}
	if !strings.Contains(ps, "envoy: no host leads it") || v.Exit != StatusDown {
		t.Errorf("verdict %d %s: want down, no host leads the envoy", v.Exit, ps)
	}
	if strings.Contains(ps, "box-a: no renewal") {
		t.Errorf("this host renewed, yet: %s", ps)
	}
	d := st.Document(time.Now())
	if len(d.Hosts) != 2 || d.Hosts[0].ID != "box-a" || !d.Hosts[0].This || !d.Hosts[0].Alive || d.Hosts[0].Version != "v2" ||
		d.Hosts[1].Alive || d.Hosts[1].RenewedAgeSeconds < 3500 {
		t.Fatalf("hosts %+v", d.Hosts)
	}
	leaders := map[string]LeaderDoc{}
	for _, ld := range d.Leaders {
		leaders[ld.Role] = ld
	}
	if k := leaders["king"]; k.Host != "box-b" || !k.Held || k.Epoch != 1 || k.Since == nil {
		t.Errorf("king %+v", k)
	}
	if e := leaders["envoy"]; e.Held {
		t.Errorf("envoy %+v", e)
	}
	if ch := leaders["chamberlain"]; ch.Held || ch.Host != "" {
		t.Errorf("chamberlain %+v", ch)
	}
	for _, r := range d.Roles {
		if r.Name == "king" && (!r.Up || r.Standby != "box-b") {
			t.Errorf("king doc %+v: want up, standby for box-b", r)
		}
	}
	var out bytes.Buffer
	st.Print(&out)
	for _, want := range []string{"box-a (this host)", "standby (leader on box-b)", "LEADER"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed status lacks %q:\n%s", want, out.String())
		}
	}

	// The king that leads here and never ticks is down.
	lk.Release()
	kk, err := a.Lead(ctx, layout.RoleKing)
	if err != nil {
		t.Fatal(err)
	}
	defer kk.Release()
	st.Cluster = ReadCluster(ctx, sh.Store, sh.Config)
	if ps := problemsOf(st.Verdict()); !strings.Contains(ps, "king: down") {
		t.Errorf("this host's silent leader not reported: %s", ps)
	}
}

func TestClusterVerdict_UnreadableAndStaleHost(t *testing.T) {
	st := &Status{Kingdom: Kingdom{StartPID: 1}, Threshold: time.Minute, Cluster: &Cluster{HostID: "box-a", Err: errors.New("dial tcp: connection refused")}}
	v := st.Verdict()
	if v.Exit != StatusDown || !strings.Contains(problemsOf(v), "store: store unreadable") {
		t.Fatalf("unreadable: %d %s", v.Exit, problemsOf(v))
	}
	if d := st.Document(time.Now()); len(d.Hosts) != 0 || d.Hosts == nil || d.Leaders == nil || len(d.Errors) == 0 {
		t.Fatalf("doc %+v", d)
	}
	held := map[string]store.LeaderInfo{}
	for _, r := range app.LeaderRoles {
		held[r] = store.LeaderInfo{Holder: "box-b", Held: true}
	}
	st.Cluster = &Cluster{HostID: "box-a", Leaders: held, Hosts: []store.Host{{ID: "box-a", Alive: false}, {ID: "box-b", Alive: true}}}
	v = st.Verdict()
	if v.Exit != StatusDegraded || !strings.Contains(problemsOf(v), "box-a: no renewal") {
		t.Fatalf("stale host: %d %s", v.Exit, problemsOf(v))
	}
}

// On one machine the registry is this host, alive, and the leaders are
// this tree's: a king leading here is no standby.
func TestReadCluster_FilesStoreIsThisHost(t *testing.T) {
	t.Setenv(config.HostIDEnv, "test-host")
	l := layout.New(t.TempDir())
	sh := filesShared(t, l)
	lk, err := sh.Store.Lead(t.Context(), layout.RoleKing)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	st := &Status{Threshold: time.Minute, Cluster: ReadCluster(t.Context(), sh.Store, sh.Config), Kingdom: Kingdom{StartPID: 1, Roles: []RoleStatus{
		{Name: layout.RoleKing, SessionAlive: true, HeartbeatAge: time.Second, SinceSession: time.Hour},
		{Name: layout.RoleEnvoy, SessionAlive: true, HeartbeatAge: time.Second, SinceSession: time.Hour},
	}}}
	if st.Cluster.Err != nil {
		t.Fatal(st.Cluster.Err)
	}
	d := st.Document(time.Now())
	if len(d.Hosts) != 1 || d.Hosts[0].ID != "test-host" || !d.Hosts[0].This || !d.Hosts[0].Alive {
		t.Fatalf("hosts %+v, want this host alive", d.Hosts)
	}
	for _, r := range d.Roles {
		if r.Standby != "" {
			t.Errorf("%s shown standing by on one machine: %+v", r.Name, r)
		}
	}
	leaders := map[string]LeaderDoc{}
	for _, ld := range d.Leaders {
		leaders[ld.Role] = ld
	}
	if k := leaders["king"]; !k.Held || k.Epoch != 1 || k.Host != "" {
		t.Errorf("king %+v, want held at epoch 1", k)
	}
	if ps := problemsOf(st.Verdict()); !strings.Contains(ps, "envoy: no host leads it") || strings.Contains(ps, "king") || strings.Contains(ps, "no renewal") {
		t.Errorf("verdict problems: %s", ps)
	}
}
