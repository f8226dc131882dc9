package operator

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

func TestStatus_ShowsRolesQueuesSoldiersAndHealth(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	w, l, tc := newWatchdog(t, fakeBins(t), clock.NewFake(now), "gen-pr")
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.Heartbeat("king"), nil, 0o600)
	os.Chtimes(l.Heartbeat("king"), now.Add(-42*time.Second), now.Add(-42*time.Second))
	lead, err := lockfile.TryLeader(l.LeaderLock("king"))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	ev := filesQueue(t, l, layout.QEvents)
	ev.Put(layout.Pending, "evt-1", doc.Event{ID: "evt-1", Type: "inbox.x", Source: "inbox", Priority: "normal", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"})
	ev.Put(layout.Pending, "evt-2", doc.Event{ID: "evt-2", Type: "inbox.x", Source: "inbox", Priority: "normal", CreatedAt: "2026-11-21T10:00:00Z", Status: "pending"})
	sessions.New(l).Add(sessions.Entry{ID: "soldier-1-a", TaskID: "task-20261121-001", General: "gen-pr", StartedAt: now})
	os.WriteFile(l.Resources(), []byte(`{"timestamp":"`+now.UTC().Format(time.RFC3339)+`","system":{"cpu_percent":70,"memory_percent":10,"disk_percent":10,"load_average":[1,1,1]},"sessions":{"soldiers_active":1,"soldiers_max":3,"list":[]},"health":"yellow","tokens":{"status":"warning","daily_cost_usd":250,"daily_input_tokens":1,"daily_output_tokens":1}}`), 0o600)

	st, err := ReadStatus(ctx, l, tc, now)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	st.Print(&b)
	out := b.String()
	for _, want := range []string{"start: not running", "gen-pr", "alive", "42s ago", "events", "pending=2",
		"active soldiers: 1", "health: yellow", "tokens: warning"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var king RoleStatus
	for _, r := range st.Roles {
		if r.Name == "king" {
			king = r
		}
	}
	if !king.SessionAlive || king.LeaderPID != os.Getpid() {
		t.Errorf("king row = %+v, want alive with leader pid %d", king, os.Getpid())
	}
}

func TestDoctor_NamesEachFailureWithAFix(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.ConfigFile("king.yaml"), []byte("retry:\n  max_attempts: lots\n"), 0o600)
	os.WriteFile(l.EnvFile(), []byte("GH_TOKEN=x\n"), 0o644)
	cs := Doctor(t.Context(), l, "", nil)
	var b bytes.Buffer
	fails := PrintChecks(&b, cs)
	out := b.String()
	for _, want := range []string{"king.yaml", "retry.max_attempts", "chmod 600", "make build"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if fails < 3 {
		t.Errorf("%d failures reported, want at least 3 (config, env mode, binaries):\n%s", fails, out)
	}
}
