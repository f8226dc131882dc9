package start

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// fakeBins writes role "binaries" as tiny scripts: every role sleeps, except
// those named in dying, which exit at once.
func fakeBins(t *testing.T, dying ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"sentinel", "king", "envoy", "chamberlain", "general", "soldier-spawn"} {
		body := "#!/bin/sh\nexec sleep 3600\n"
		for _, d := range dying {
			if d == b {
				body = "#!/bin/sh\nexit 1\n"
			}
		}
		if err := os.WriteFile(filepath.Join(dir, b), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newWatchdog(t *testing.T, binDir string, c *clock.Fake, manifests ...string) (*Watchdog, layout.Layout, *tmux.Client) {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := "watchdog:\n  interval_seconds: 1\n  stop_grace_seconds: 1\n  crash_loop:\n    max_restarts: 3\n    window_minutes: 10\n"
	os.WriteFile(l.ConfigFile("system.yaml"), []byte(sys), 0o600)
	for _, m := range manifests {
		os.WriteFile(l.GeneralManifest(m), []byte("name: "+m+"\ndescription: test general\nsubscribes: [\"test.*\"]\n"), 0o600)
	}
	tc := &tmux.Client{Socket: fmt.Sprintf("kingdom-start-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { tc.KillServer(context.Background()) })
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "start", c)
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := New(Options{Layout: l, BinDir: binDir, Tmux: tc, Events: em, Clock: c,
		Store: st, Host: filesHost(l, "test-host")})
	if err != nil {
		t.Fatal(err)
	}
	return w, l, tc
}

func sessionNames(t *testing.T, tc *tmux.Client) map[string]tmux.Session {
	t.Helper()
	ss, err := tc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]tmux.Session{}
	for _, s := range ss {
		m[s.Name] = s
	}
	return m
}

func TestWatchdog_LaunchesEveryRoleAndRelaunchesAKilledOne(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	w, l, tc := newWatchdog(t, fakeBins(t), c, "gen-pr", "gen-herald")
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	got := sessionNames(t, tc)
	for _, want := range []string{"sentinel", "king", "envoy", "chamberlain", "gen-pr", "gen-herald"} {
		if _, ok := got[want]; !ok {
			t.Fatalf("session %s not launched; have %v", want, got)
		}
	}
	oldPID := got["king"].PID
	tc.Kill(ctx, "king")
	c.Advance(5 * time.Minute) // it lived long: this death does not count
	w.Round(ctx)
	got = sessionNames(t, tc)
	k, ok := got["king"]
	if !ok || k.PID == oldPID {
		t.Fatalf("king not relaunched (ok=%v pid %d, old %d)", ok, k.PID, oldPID)
	}
	if len(w.roles["king"].deaths) != 0 {
		t.Fatalf("a death after 5 minutes counted toward the crash-loop guard")
	}
	// A broken manifest keeps its general running (it may be mid-edit) and
	// never takes the other generals down.
	os.WriteFile(l.GeneralManifest("gen-herald"), []byte("name: gen-herald\nmax_concurrent: lots\n"), 0o600)
	w.Round(ctx)
	got = sessionNames(t, tc)
	if _, ok := got["gen-pr"]; !ok {
		t.Fatal("a broken gen-herald manifest stopped gen-pr")
	}
	if _, ok := got["gen-herald"]; !ok {
		t.Fatal("a general whose manifest is briefly invalid was stopped")
	}
	// Uninstalling a general stops its session at the next round.
	os.Remove(l.GeneralManifest("gen-herald"))
	w.Round(ctx)
	if _, ok := sessionNames(t, tc)["gen-herald"]; ok {
		t.Fatal("uninstalled general still running")
	}
	b, _ := os.ReadFile(l.EventsLog())
	if !strings.Contains(string(b), `"system.role_died"`) {
		t.Error("no system.role_died event")
	}
}

func TestWatchdog_CrashLoopGivesUpAndQueuesOneUrgentAlert(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	bins := fakeBins(t, "envoy")
	w, l, tc := newWatchdog(t, bins, c)
	for round := 0; round < 6; round++ {
		w.Round(ctx)
		// Wait for the dying envoy's session to end (a real process exits).
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, ok := sessionNames(t, tc)["envoy"]; !ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Advance(2 * time.Second)
		w.poll()
	}
	if got := w.GivenUp(); len(got) != 1 || got[0] != "envoy" {
		t.Fatalf("given up on %v, want [envoy]", got)
	}
	// No more launches once given up.
	before := countLaunches(t, l, "envoy")
	w.Round(ctx)
	w.Round(ctx)
	if after := countLaunches(t, l, "envoy"); after != before {
		t.Fatalf("envoy launched %d more times after giving up", after-before)
	}
	if before != 3 {
		t.Errorf("envoy launched %d times, want 3 (max_restarts)", before)
	}
	msgs := queue.OnStore(w.o.Store, l, layout.QMessages, nil, "test-host")
	es, _ := msgs.List(layout.Pending)
	if len(es) != 1 {
		t.Fatalf("%d alert messages, want 1", len(es))
	}
	m, err := schema.DecodeMessage(es[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Urgency != doc.UrgencyUrgent || !strings.Contains(m.Content, "envoy") {
		t.Fatalf("alert = %+v", m)
	}
	// Other roles are unaffected.
	if _, ok := sessionNames(t, tc)["king"]; !ok {
		t.Fatal("king not running")
	}
	// Fixing the binary clears the guard.
	os.WriteFile(filepath.Join(bins, "envoy"), []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755)
	future := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(bins, "envoy"), future, future)
	w.Round(ctx)
	if _, ok := sessionNames(t, tc)["envoy"]; !ok {
		t.Fatal("envoy not relaunched after its binary changed")
	}
}

func countLaunches(t *testing.T, l layout.Layout, role string) int {
	b, _ := os.ReadFile(l.EventsLog())
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "recovery.session_started") && strings.Contains(line, `"role":"`+role+`"`) {
			n++
		}
	}
	return n
}

func TestStopRoles_SIGTERMThenKill(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Now())
	w, _, tc := newWatchdog(t, fakeBins(t), c)
	w.Round(ctx)
	pids := []int{}
	for _, s := range sessionNames(t, tc) {
		pids = append(pids, s.PID)
	}
	// A soldier session must survive a role stop.
	tc.NewSession(ctx, "soldier-1-ab", tmux.NewOptions{}, "sleep", "3600")
	w.StopAll(ctx)
	left := sessionNames(t, tc)
	if len(left) != 1 {
		t.Fatalf("sessions left: %v, want only the soldier", left)
	}
	for _, p := range pids {
		deadline := time.Now().Add(60 * time.Second)
		for PIDAlive(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the kernel and tmux finish the exit
		}
		if PIDAlive(p) {
			t.Errorf("pid %d still alive", p)
		}
	}
}

// leaseLosingBins: king exits as a role whose lease was lost does
// (last-exit 5), envoy exits 1.
func leaseLosingBins(t *testing.T) string {
	dir := fakeBins(t, "envoy")
	lost := "#!/bin/sh\nmkdir -p \"$2/state/king\"\nprintf '{\"exit\":5,\"error\":\"king epoch 1: leadership lost\",\"at\":\"2026-11-21T12:00:00Z\"}' > \"$2/state/king/last-exit\"\nexit 5\n"
	if err := os.WriteFile(filepath.Join(dir, "king"), []byte(lost), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitDead waits for the role's pane process to end (a real process).
func waitDead(t *testing.T, w *Watchdog, role string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for PIDAlive(w.roles[role].pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) did not exit", role, w.roles[role].pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchdog_ADeathRelaunchesAtOnceAndALostLeaseIsNoCrash(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	w, l, _ := newWatchdog(t, leaseLosingBins(t), c)
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	// No round is run below: every relaunch comes from check's death.
	for range 5 {
		waitDead(t, w, "king")
		waitDead(t, w, "envoy")
		w.check(ctx)
	}
	if n := countLaunches(t, l, "king"); n != 6 {
		t.Fatalf("king launched %d times, want 6 (the first, then at once after each of 5 deaths)", n)
	}
	if d := len(w.roles["king"].deaths); d != 0 {
		t.Fatalf("%d lost leases counted toward the crash-loop guard", d)
	}
	if got := w.GivenUp(); len(got) != 1 || got[0] != "envoy" {
		t.Fatalf("given up on %v, want [envoy]: a real crash loop is still stopped", got)
	}
	if n := countLaunches(t, l, "envoy"); n != 3 {
		t.Fatalf("envoy launched %d times, want 3 (max_restarts)", n)
	}
	for _, name := range []string{"king", "envoy"} {
		if sp := w.roles[name]; sp == nil {
			t.Fatalf("no state for %s", name)
		}
	}
	specs, _ := w.Specs()
	for _, sp := range specs {
		if sp.Name == "king" && sp.Argv[len(sp.Argv)-1] != "--standby" {
			t.Fatalf("king relaunched without --standby: %v", sp.Argv)
		}
	}
}

// `start stop` after start died, typed in a service user's shell (no
// UTF-8 locale): StopRoles stops the roles it says it stops and names
// them; a socket it cannot list is an error, never a silent success.
func TestStopRoles_ReportsWhatItStoppedWithoutAUTF8Locale(t *testing.T) {
	t.Setenv("LC_ALL", "C")
	t.Setenv("LANG", "C")
	ctx := context.Background()
	c := clock.NewFake(time.Now())
	w, _, tc := newWatchdog(t, fakeBins(t), c, "gen-pr")
	w.Round(ctx)
	tc.NewSession(ctx, "soldier-1-ab", tmux.NewOptions{}, "sleep", "3600")
	stopped, err := StopRoles(ctx, tc, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range stopped {
		names[s.Name] = true
	}
	if len(stopped) != 5 || !names["king"] || !names["gen-pr"] {
		t.Fatalf("stopped %+v, want the 4 core roles and gen-pr", stopped)
	}
	if left := sessionNames(t, tc); len(left) != 1 {
		t.Fatalf("sessions left: %v, want only the soldier", left)
	}
	bin := filepath.Join(t.TempDir(), "tmux")
	os.WriteFile(bin, []byte("#!/bin/sh\necho 'error connecting to /tmp/x/s (Permission denied)' >&2\nexit 1\n"), 0o755)
	if _, err := StopRoles(ctx, &tmux.Client{Bin: bin, Socket: "/tmp/x/s"}, time.Second, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "/tmp/x/s unreachable") {
		t.Fatalf("StopRoles on an unreachable socket: %v", err)
	}
}
