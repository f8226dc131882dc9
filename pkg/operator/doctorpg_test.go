package operator

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// pgDoctorTree is an installation whose store is postgres with its DSN in
// KINGDOM_TEST_DSN.
func pgDoctorTree(t *testing.T) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := "store:\n  kind: postgres\n  dsn_env: KINGDOM_TEST_DSN\n  host_id: box-a\n"
	if err := os.WriteFile(l.ConfigFile(config.SystemFile), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

func checksByName(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestDoctor_PostgresChecksPass(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t))
	l := pgDoctorTree(t)
	m := checksByName(Doctor(t.Context(), l, "", map[string]string{"KINGDOM_TEST_DSN": config.SourceEnvFile}))
	for _, name := range []string{"postgres dsn", "postgres reachable", "postgres version", "postgres keepalives", "postgres pooler"} {
		c, ok := m[name]
		if !ok {
			t.Fatalf("no %q check; have %v", name, m)
		}
		if !c.OK || c.Warn {
			t.Errorf("%s: %+v, want ok against the test server (PostgreSQL ≥ 14, keepalives 5/2/3, no pooler)", name, c)
		}
	}
	if !strings.Contains(m["postgres dsn"].Info, "KINGDOM_TEST_DSN from kingdom.env") {
		t.Errorf("dsn check %q does not say where the variable came from", m["postgres dsn"].Info)
	}
	if !strings.Contains(m["postgres keepalives"].Info, "11s") {
		t.Errorf("keepalives %q: want 5 + 2×3 = 11 s", m["postgres keepalives"].Info)
	}
}

func TestDoctor_PostgresSessionWithoutKeepalivesFails(t *testing.T) {
	// The DSN sets the server's keepalives of this session to the Linux
	// defaults: a dead leader's lock would outlive it by hours.
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t)+"&tcp_keepalives_idle=7200&tcp_keepalives_interval=75&tcp_keepalives_count=9")
	m := checksByName(Doctor(t.Context(), pgDoctorTree(t), "", nil))
	c := m["postgres keepalives"]
	if c.OK || !strings.Contains(c.Fix, "tcp_keepalives_idle = 5") {
		t.Fatalf("keepalives 7200/75/9: %+v, want a failure with the server-side fix", c)
	}
}

func TestDoctor_PostgresUnsetOrUnreachableDSN(t *testing.T) {
	os.Unsetenv("KINGDOM_TEST_DSN")
	m := checksByName(Doctor(t.Context(), pgDoctorTree(t), "", nil))
	if c := m["postgres dsn"]; c.OK || !strings.Contains(c.Fix, "KINGDOM_TEST_DSN") {
		t.Fatalf("unset DSN: %+v", c)
	}
	if _, ok := m["postgres reachable"]; ok {
		t.Fatal("reachability checked without a DSN")
	}
	t.Setenv("KINGDOM_TEST_DSN", "postgres://kingdom:hunter2secret@127.0.0.1:1/none?sslmode=disable")
	m = checksByName(Doctor(t.Context(), pgDoctorTree(t), "", nil))
	c := m["postgres reachable"]
	if c.OK || strings.Contains(c.Info, "hunter2secret") || c.Fix == "" {
		t.Fatalf("dead server: %+v, want a failure with a fix and no password", c)
	}
}

func TestDoctor_FilesModeHasNoPostgresChecks(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	for _, c := range Doctor(t.Context(), l, "", nil) {
		if strings.HasPrefix(c.Name, "postgres") {
			t.Fatalf("files mode ran %q", c.Name)
		}
	}
}

func TestJudgeKeepalivesAndPooler(t *testing.T) {
	fence := 300 * time.Second
	for _, c := range []struct {
		unix                  bool
		idle, interval, count int
		ok, warn              bool
	}{
		{false, 5, 2, 3, true, false},
		{true, 0, 0, 0, true, false},
		{false, 0, 2, 3, false, false},
		{false, 30, 10, 5, true, true},
		{false, 7200, 75, 9, false, false},
	} {
		ok, warn, info := judgeKeepalives(c.unix, c.idle, c.interval, c.count, fence)
		if ok != c.ok || warn != c.warn {
			t.Errorf("keepalives %+v: ok %v warn %v (%s)", c, ok, warn, info)
		}
	}
	for _, c := range []struct {
		p1, p2 int32
		locked bool
		holder int32
		ok     bool
	}{
		{10, 10, true, 10, true},
		{10, 11, true, 10, false}, // transactions moved between backends
		{10, 10, true, 0, false},  // the lock is not where we took it
		{10, 10, true, 12, false},
		{10, 10, false, 0, false},
	} {
		if ok, info := judgePooler(c.p1, c.p2, c.locked, c.holder); ok != c.ok {
			t.Errorf("pooler %+v: ok %v (%s)", c, ok, info)
		}
	}
}
