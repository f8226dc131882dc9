package operator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// A host lost past store.takeover_seconds stays a problem of the verdict
// until it is forgotten; one merely silent (within takeover) is not.
func TestVerdict_LostHostUntilForgotten(t *testing.T) {
	st := &Status{Kingdom: Kingdom{StartPID: 1}, Threshold: time.Minute}
	st.Cluster = &Cluster{HostID: "box-a", Takeover: 10 * time.Minute, Leaders: heldLeaders(), Hosts: []store.Host{
		{ID: "box-a", Alive: true}, {ID: "box-b", Age: time.Hour}, {ID: "box-c", Age: 6 * time.Minute}}}
	v := st.Verdict()
	ps := problemsOf(v)
	if v.Exit != StatusDegraded || !strings.Contains(ps, "box-b: lost") || !strings.Contains(ps, "start hosts forget box-b") || strings.Contains(ps, "box-c") {
		t.Fatalf("verdict %d: %s", v.Exit, ps)
	}
	st.Cluster.Hosts = st.Cluster.Hosts[:1]
	if v := st.Verdict(); v.Exit != StatusOK {
		t.Fatalf("after forgetting: %d %s", v.Exit, problemsOf(v))
	}
}

func heldLeaders() map[string]store.LeaderInfo {
	m := map[string]store.LeaderInfo{}
	for _, r := range app.LeaderRoles {
		m[r] = store.LeaderInfo{Held: true, Holder: "box-a"}
	}
	return m
}

func TestForgetHost_FilesStoreRefusesClearly(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	sh := filesShared(t, l)
	sh.Config.HostID = "test-host"
	t.Setenv(config.HostIDEnv, "test-host")
	if err := ForgetHost(t.Context(), sh, "box-b"); err == nil || !strings.Contains(err.Error(), "the files store has one host") {
		t.Fatalf("forget in files mode: %v", err)
	}
	if err := ForgetHost(t.Context(), sh, "test-host"); !errors.Is(err, ErrHostAlive) || !strings.Contains(err.Error(), "this host") {
		t.Fatalf("forget this host: %v", err)
	}
}

func TestForgetHost_RetiresALostHostInPostgres(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t))
	t.Setenv(config.HostIDEnv, "box-a")
	ctx := context.Background()
	l := layout.New(t.TempDir())
	l.Ensure()
	cfg := config.DefaultStore()
	cfg.Kind, cfg.DSNEnv = config.StorePostgres, "KINGDOM_TEST_DSN"
	st, err := open.Store(ctx, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.RenewHost(ctx, "box-a", "v2", time.Now())
	st.RenewHost(ctx, "box-b", "v1", time.Now())
	sh := StoreShared(l, st)
	sh.Config = cfg
	if err := ForgetHost(ctx, sh, "box-b"); !errors.Is(err, ErrHostAlive) {
		t.Fatalf("forget a live host: %v, want refused", err)
	}
	pool, _ := open.Pool(st)
	if _, err := pool.Exec(ctx, "UPDATE hosts SET renewed_at = now() - interval '1 hour' WHERE host_id='box-b'"); err != nil {
		t.Fatal(err)
	}
	c, err := ReadHosts(ctx, sh)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	PrintHosts(&out, c)
	if !strings.Contains(out.String(), "box-a (this host)") || !strings.Contains(out.String(), "lost (`start hosts forget box-b`") {
		t.Fatalf("start hosts:\n%s", out.String())
	}
	if err := ForgetHost(ctx, sh, "box-b"); err != nil {
		t.Fatal(err)
	}
	if c, _ := ReadHosts(ctx, sh); len(c.Hosts) != 1 || c.Hosts[0].ID != "box-a" {
		t.Fatalf("hosts after forget: %+v", c.Hosts)
	}
	if err := ForgetHost(ctx, sh, "box-b"); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Fatalf("forget twice: %v", err)
	}
}

// An operator's shell without the unit's KINGDOM_HOST_ID names this host
// as the roles do: by the id start recorded, not the hostname.
func TestOpenShared_HostIDStartRecorded(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.ConfigFile(config.SystemFile), []byte("store:\n  kind: files\n"), 0o600)
	if err := atomicfile.WriteFile(config.HostIDRecord(l.StateDir()), []byte("unit-host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.HostIDEnv, "")
	sh, err := OpenShared(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	c := ReadCluster(t.Context(), sh.Store, sh.Config)
	if c.Err != nil || c.HostID != "unit-host" || len(c.Hosts) != 1 || c.Hosts[0].ID != "unit-host" {
		t.Fatalf("cluster %+v, want this host unit-host", c)
	}
}

// A tmux socket this shell cannot reach is named, with its path; roles
// whose heartbeats are fresh are not called down.
func TestReadStatus_UnreachableSocketIsNamedRolesJudgedByHeartbeat(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	for _, r := range layout.CoreRoles {
		os.MkdirAll(l.RoleStateDir(r), 0o700)
		atomicfile.Touch(l.Heartbeat(r))
	}
	bin := filepath.Join(t.TempDir(), "tmux")
	os.WriteFile(bin, []byte("#!/bin/sh\necho 'error connecting to /tmp/tmux-1000/kingdom (Permission denied)' >&2\nexit 1\n"), 0o755)
	tc := &tmux.Client{Bin: bin, Socket: "/tmp/tmux-1000/kingdom"}
	st, err := ReadStatus(t.Context(), l, tc, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ps := problemsOf(st.Verdict())
	if !strings.Contains(ps, "tmux: socket /tmp/tmux-1000/kingdom unreachable") {
		t.Fatalf("problems do not name the socket:\n%s", ps)
	}
	if strings.Contains(ps, "no tmux session") || strings.Contains(ps, "king: down") {
		t.Fatalf("a live role called down:\n%s", ps)
	}
	var out strings.Builder
	st.Print(&out)
	if !strings.Contains(out.String(), "tmux socket /tmp/tmux-1000/kingdom unreachable") {
		t.Fatalf("status does not say the socket is unreachable:\n%s", out.String())
	}
}
