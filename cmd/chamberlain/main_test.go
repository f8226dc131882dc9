package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
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
	if err := schema.Validate(schema.KindResources, []byte(out)); err != nil {
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
		schema.FormatTime(time.Now().Add(-5*time.Second)))
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
