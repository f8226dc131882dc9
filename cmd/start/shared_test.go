package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgBase is a host's base dir with store.kind postgres (the DSN in
// KINGDOM_TEST_DSN).
func pgBase(t *testing.T, host string) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := "store:\n  kind: postgres\n  dsn_env: KINGDOM_TEST_DSN\n  host_id: " + host + "\n"
	if err := os.WriteFile(l.ConfigFile(config.SystemFile), []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// The operator commands run on host h2 read what host h1 put in the
// shared store: the task h1 claimed (with its host) and the pause.
func TestStartCommands_PostgresFromAnotherHost(t *testing.T) {
	t.Setenv("KINGDOM_TEST_DSN", pgtest.DB(t))
	t.Setenv(config.HostIDEnv, "")
	bin := startBin(t)
	h1, err := operator.OpenShared(t.Context(), pgBase(t, "h1"))
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	id := "task-20261124-001"
	tk := doc.Task{ID: id, EventID: "evt-1", TargetGeneral: "gen-pr", Type: "github.pr.review_requested",
		Payload: map[string]any{}, Priority: "normal", CreatedAt: doc.FormatTime(time.Now().Add(-time.Minute)), Status: layout.Pending}
	tasks := h1.Queues[layout.QTasks]
	if err := tasks.PutOnce(layout.Pending, id, tk); err != nil {
		t.Fatal(err)
	}
	if err := tasks.ClaimAs(layout.Pending, layout.InProgress, id, store.Claim{Holder: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := control.WritePause(t.Context(), h1.KV, control.Pause{Since: "2026-11-24T19:00:00Z", By: "alice@h1"}); err != nil {
		t.Fatal(err)
	}

	l2 := pgBase(t, "h2")
	out, errOut, code := runStart(t, bin, l2.Base, "tasks", "--json")
	if code != 0 {
		t.Fatalf("tasks --json exit %d: %s", code, errOut)
	}
	var rows []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Host  string `json:"host"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("tasks --json: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].ID != id || rows[0].State != layout.InProgress || rows[0].Host != "h1" {
		t.Errorf("tasks on h2 %+v, want %s in_progress on h1", rows, id)
	}
	if out, _, _ := runStart(t, bin, l2.Base, "tasks"); !strings.Contains(out, "PAUSED since 2026-11-24T19:00:00Z by alice@h1") || !strings.Contains(out, "HOST") {
		t.Errorf("tasks table on h2:\n%s", out)
	}

	out, _, _ = runStart(t, bin, l2.Base, "status")
	for _, want := range []string{"pending=0 in_progress=1 completed=0 rejected=0", "PAUSED since 2026-11-24T19:00:00Z by alice@h1"} {
		if !strings.Contains(out, want) {
			t.Errorf("status on h2 lacks %q:\n%s", want, out)
		}
	}
}
