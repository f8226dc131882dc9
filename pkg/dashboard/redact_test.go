package dashboard

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// TestState_NeverShowsASecretFromPayloadsOrResults: /api/v1/state (and so
// the page, which renders it) passes the outside text it shows — task
// titles from event payloads, result summaries and errors — through the
// redactor (SPEC §10.14), before cutting it (a cut secret would leak its
// head).
func TestState_NeverShowsASecretFromPayloadsOrResults(t *testing.T) {
	const secret = "plainGitHubValue0123456789abcdef" // no token shape: only the exact value matches
	t.Setenv("GH_TOKEN", secret)
	l := newBase(t)
	tasks := filesQueue(t, l, layout.QTasks)
	// The secret straddles the 200-rune cut of a title.
	long := strings.Repeat("x", 190) + " " + secret + " tail"
	tasks.Put(layout.Completed, "task-20261124-101", validTask("task-20261124-101", "slack.channel.message",
		map[string]any{"text": long, "channel": "D1"}, "completed"))
	os.WriteFile(l.ResultFinal("task-20261124-101"), []byte(`{"task_id":"task-20261124-101","status":"failed","summary":"pushed with `+secret+`","error":"auth `+secret+` refused","error_reason":"AgentFailed","general":"gen-pr","duration_seconds":1,"completed_at":"2026-11-24T10:00:00Z","retry_count":0}`), 0o600)
	tasks.Put(layout.InProgress, "task-20261124-102", validTask("task-20261124-102", "inbox.request",
		map[string]any{"title": "use " + secret + " please"}, "in_progress"))
	sessions.New(l).Add(sessions.Entry{ID: "soldier-1-a", TaskID: "task-20261124-102", General: "gen-pr", StartedAt: time.Now()})
	_, url := startServer(t, Options{Layout: l})

	code, body := get(t, url+"/api/v1/state")
	if code != 200 {
		t.Fatalf("state: %d %s", code, body)
	}
	if !strings.Contains(body, "pushed with ") || !strings.Contains(body, "use ") || !strings.Contains(body, "xxxxx") {
		t.Fatalf("the state does not show the texts the test planted:\n%s", body)
	}
	if strings.Contains(body, secret[:10]) {
		t.Fatalf("/api/v1/state shows the GH_TOKEN value (or its head):\n%s", body)
	}
	for _, want := range []string{"pushed with [REDACTED]", "auth [REDACTED] refused", "use [REDACTED] please"} {
		if !strings.Contains(body, want) {
			t.Errorf("state lacks %q", want)
		}
	}
}
