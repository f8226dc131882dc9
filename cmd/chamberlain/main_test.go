package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/chamberlain"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func runOnce(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := command()
	var out bytes.Buffer
	cmd.Writer = &out
	err := cmd.Run(context.Background(), append([]string{"chamberlain"}, args...))
	return out.String(), app.ExitCode(err)
}

// snapshot maps every file under dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[p] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func setup(t *testing.T) layout.Layout {
	t.Helper()
	sock := fmt.Sprintf("kingdom-test-chcmd-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv(tmux.EnvSocket, sock)
	t.Cleanup(func() { (&tmux.Client{Socket: sock}).KillServer(context.Background()) })
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestOnce_NoDaemonRefreshesResources(t *testing.T) {
	l := setup(t)
	out, code := runOnce(t, "--base-dir", l.Base, "--once", "--json")
	if code > 2 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if err := schema.Validate(doc.KindResources, []byte(out)); err != nil {
		t.Fatalf("--json output is not a resources document: %v\n%s", err, out)
	}
	var doc struct{ Health string }
	json.Unmarshal([]byte(out), &doc)
	// No role runs in this installation: whatever the resources say, the
	// kingdom is down (SPEC §10.12), while the document keeps resource health.
	if code != 2 {
		t.Fatalf("health %s exit %d, want 2 (no role is running)", doc.Health, code)
	}
	if _, err := os.Stat(l.Resources()); err != nil {
		t.Fatalf("resources.json not written without a daemon: %v", err)
	}
	table, _ := runOnce(t, "--base-dir", l.Base, "--once")
	for _, want := range []string{"HEALTH", "cpu", "memory", "disk", "ROLE", "king", "SOLDIERS", "TOKENS", "QUEUE"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestOnce_ReadOnlyBesideDaemon(t *testing.T) {
	l := setup(t)
	// A state left by earlier runs, plus unread internal events.
	if _, code := runOnce(t, "--base-dir", l.Base, "--once"); code > 2 {
		t.Fatalf("first run exit %d", code)
	}
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "gen-pr", nil)
	for i := 0; i < 5; i++ {
		em.Emit("task.failed", map[string]any{"task_id": "t"})
	}
	em.Close()
	if err := os.WriteFile(l.Heartbeat("king"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(l.Heartbeat("king"), old, old) // dead king: a daemon would alert

	leader, err := lockfile.TryLeader(l.LeaderLock(layout.RoleChamberlain))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Release()
	before := snapshot(t, l.Base)
	out, code := runOnce(t, "--base-dir", l.Base, "--once")
	if code > 2 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !strings.Contains(out, "dead") {
		t.Errorf("table does not show the dead king:\n%s", out)
	}
	after := snapshot(t, l.Base)
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s created", p)
		}
	}
}

// Beside a daemon, --once takes CPU from the daemon's fresh resources.json
// instead of sampling a window of its own (SPEC §9.26): answering at once matters more than a fresh CPU window.
func TestOnce_BesideDaemonUsesTheDaemonsFreshCPUSample(t *testing.T) {
	l := setup(t)
	doc := fmt.Sprintf(`{"timestamp":%q,"system":{"cpu_percent":73.5,"memory_percent":1,"disk_percent":1,"load_average":[0,0,0]},"sessions":{"soldiers_active":0,"soldiers_max":4,"list":[]},"health":"yellow"}`,
		doc.FormatTime(time.Now().Add(-5*time.Second)))
	if err := os.WriteFile(l.Resources(), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	leader, err := lockfile.TryLeader(l.LeaderLock(layout.RoleChamberlain))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Release()
	out, code := runOnce(t, "--base-dir", l.Base, "--once", "--json")
	if code > 2 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var got struct {
		System struct {
			CPU float64 `json:"cpu_percent"`
		} `json:"system"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.System.CPU != 73.5 {
		t.Errorf("cpu_percent = %v, want the daemon's 73.5", got.System.CPU)
	}
}

func TestOnce_CannotEvaluateExits3(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	if _, code := runOnce(t, "--base-dir", missing, "--once"); code != 3 {
		t.Fatalf("missing base dir: exit %d, want 3", code)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("--once created the missing base dir")
	}
	l := setup(t)
	os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte("thresholds: [1, 2]\n"), 0o600)
	if _, code := runOnce(t, "--base-dir", l.Base, "--once"); code != 3 {
		t.Fatalf("bad chamberlain.yaml: exit %d, want 3", code)
	}
	os.Remove(l.ConfigFile("chamberlain.yaml"))
	os.WriteFile(l.GeneralManifest("gen-x"), []byte("name: gen-x\nsubscribes: nope: [\n"), 0o600)
	if _, code := runOnce(t, "--base-dir", l.Base, "--once"); code != 3 {
		t.Fatalf("bad manifest: exit %d, want 3", code)
	}
}

// calm keeps a loaded test machine's resources green so the verdict speaks
// of roles, pauses and watchers only.
const calm = "thresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 97\n  memory_orange: 98\n  memory_red: 99\n"

// everyRoleUp gives each core role a live tmux session and a fresh heartbeat.
func everyRoleUp(t *testing.T, l layout.Layout) {
	t.Helper()
	if err := os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte(calm), 0o600); err != nil {
		t.Fatal(err)
	}
	tm := &tmux.Client{Socket: os.Getenv(tmux.EnvSocket)}
	for _, role := range []string{"sentinel", "king", "envoy", "chamberlain"} {
		if err := tm.NewSession(context.Background(), role, tmux.NewOptions{}, "sleep", "600"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.Heartbeat(role), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A `start pause` left in place stops all work: --once names it and exits 1
// (degraded) until it is lifted, in the table and in --json's verdict.
func TestOnce_AForgottenPauseIsNamedAndDegrades(t *testing.T) {
	l := setup(t)
	everyRoleUp(t, l)
	out, code := runOnce(t, "--base-dir", l.Base, "--once")
	if code != 0 || strings.Contains(out, "PAUSED") {
		t.Fatalf("before the pause: exit %d, want 0 and no pause\n%s", code, out)
	}
	if err := atomicfile.WriteJSON(l.KingPaused(), control.Pause{Since: doc.FormatTime(time.Now().Add(-26 * time.Hour)), By: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	out, code = runOnce(t, "--base-dir", l.Base, "--once")
	if code != 1 || !strings.Contains(out, "PAUSED") || !strings.Contains(out, "alice@host") || !strings.Contains(out, "start resume") {
		t.Fatalf("paused: exit %d, want 1 with the pause shown\n%s", code, out)
	}
	out, code = runOnce(t, "--base-dir", l.Base, "--once", "--json")
	if code != 1 {
		t.Fatalf("--json paused: exit %d, want 1\n%s", code, out)
	}
	if err := schema.Validate(doc.KindCheck, []byte(out)); err != nil {
		t.Fatalf("--json output does not fit schemas/check.json: %v\n%s", err, out)
	}
	var doc struct {
		Health  string
		Verdict struct {
			Exit     int `json:"exit"`
			Problems []struct {
				Role, Check, Reason string
			} `json:"problems"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Health == "" || doc.Verdict.Exit != 1 || len(doc.Verdict.Problems) != 1 || doc.Verdict.Problems[0].Check != "kingdom" ||
		!strings.Contains(doc.Verdict.Problems[0].Reason, "paused") {
		t.Fatalf("--json verdict = %+v, want exit 1 naming the pause beside the resources", doc)
	}
	os.Remove(l.KingPaused())
	if out, code = runOnce(t, "--base-dir", l.Base, "--once", "--json"); code != 0 || !strings.Contains(out, `"exit": 0`) {
		t.Fatalf("after resume: exit %d\n%s", code, out)
	}
}

// --json carries the verdict of a kingdom that is down: the roles by name.
func TestOnce_JSONVerdictNamesTheRolesDown(t *testing.T) {
	l := setup(t)
	out, code := runOnce(t, "--base-dir", l.Base, "--once", "--json")
	var doc struct {
		Verdict struct {
			Exit     int `json:"exit"`
			Problems []struct{ Role, Reason string }
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	roles := map[string]bool{}
	for _, p := range doc.Verdict.Problems {
		roles[p.Role] = true
	}
	if code != 2 || doc.Verdict.Exit != code || !roles["king"] || !roles["sentinel"] {
		t.Fatalf("exit %d, verdict %+v: want 2 naming king and sentinel", code, doc.Verdict)
	}
}

func TestHelp_NamesTheExitCodes(t *testing.T) {
	out, code := runOnce(t, "--help")
	if code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"0 when all is well", "1 degraded", "2 down", "3 when it cannot evaluate"} {
		if !strings.Contains(flat, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}

// SPEC §12.2: when --once cannot reach the database it names the store in
// the verdict (exit 2, --json included), not every role "down".
func TestOnce_UnreachableStoreNamesTheStore(t *testing.T) {
	l := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	t.Setenv("KINGDOM_TEST_DOWN_DSN", "postgres://kingdom@"+addr+"/kingdom?sslmode=disable&connect_timeout=2")
	t.Setenv("KINGDOM_HOST_ID", "")
	os.WriteFile(l.ConfigFile("system.yaml"), []byte("store:\n  kind: postgres\n  dsn_env: KINGDOM_TEST_DOWN_DSN\n  host_id: box-1\n"), 0o600)
	out, code := runOnce(t, "--base-dir", l.Base, "--once", "--json")
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, out)
	}
	var doc struct {
		Verdict struct {
			Problems []struct{ Check, Reason string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	found := false
	for _, p := range doc.Verdict.Problems {
		if p.Check == "store" && strings.HasPrefix(p.Reason, "store unreachable since ") && strings.Contains(p.Reason, "refused") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no store problem in the verdict: %s", out)
	}
}

// The dashboard shows the chamberlain's verdict: its problems and each
// role's state where it is not plain up.
func TestVerdictOf_StandbyAndProblems(t *testing.T) {
	rep := &chamberlain.Report{Time: time.Now(), Health: chamberlain.Green,
		StoreErr: &chamberlain.Outage{Since: time.Now(), Error: "connection refused"},
		Roles: []chamberlain.RoleStatus{
			{Name: "king", State: chamberlain.RoleStandby, Standby: "host-b", Session: true},
			{Name: "sentinel", State: chamberlain.RoleOK, Session: true},
		}}
	v := verdictOf(rep)
	if v.Exit != 2 || len(v.Problems) == 0 || !strings.HasPrefix(v.Problems[0], "store store unreachable since") {
		t.Fatalf("verdict %+v", v)
	}
	if v.Roles["king"] != "standby (leader on host-b)" || v.Roles["sentinel"] != "" {
		t.Fatalf("roles %v", v.Roles)
	}
	if verdictOf(nil) != nil {
		t.Fatal("a verdict before the first tick")
	}
}
