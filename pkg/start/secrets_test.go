package start

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Issue #13 item 2 (SPEC §10.14): start runs with kingdom.env applied, but
// the tmux server it starts — whose global environment every role and
// soldier session inherits — holds no secret. Roles read kingdom.env
// themselves.
func TestWatchdog_TmuxServerEnvironmentHoldsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"GH_TOKEN": "gh-secret-for-tmux-01", "JIRA_API_TOKEN": "jira-secret-for-tmux-02",
		"SLACK_BOT_TOKEN": "xoxb-secret-for-tmux-03", "SLACK_APP_TOKEN": "xapp-secret-for-tmux-04",
		"ANTHROPIC_API_KEY": "anthropic-secret-tmux-05",
		// Engine credentials beside the API keys, the dashboard's default
		// token and the variable a chamberlain.yaml names for it.
		"CLAUDE_CODE_OAUTH_TOKEN": "claude-oauth-secret-tmux-06", "ANTHROPIC_AUTH_TOKEN": "anthropic-auth-secret-tmux-07",
		"CODEX_API_KEY": "codex-secret-for-tmux-08", "KINGDOM_HTTP_TOKEN": "dash-default-secret-tmux-09",
		"DASH_SECRET_TOKEN": "dash-custom-secret-tmux-10",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	w, l, tc := newWatchdog(t, fakeBins(t), c, "gen-pr")
	os.WriteFile(l.ConfigFile(config.ChamberlainFile), []byte("http:\n  token_env: DASH_SECRET_TOKEN\n"), 0o600)
	// What cmd/start does before its first round: it learns the secret
	// names from the config.
	if _, err := app.SetupWith(layout.RoleStart, l.Base, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redact.SetExtraNames(nil) })
	if err := w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tmux", "-L", tc.Socket, "show-environment", "-g").CombinedOutput()
	if err != nil {
		t.Fatalf("show-environment -g: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "PATH=") {
		t.Fatalf("global environment looks empty; the test proves nothing:\n%s", out)
	}
	ss := sessionNames(t, tc)
	king, ok := ss["king"]
	if !ok || king.PID <= 0 {
		t.Fatalf("king session not running: %v", ss)
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(king.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range secrets {
		if strings.Contains(string(out), v) || strings.Contains(string(out), k+"=") {
			t.Errorf("tmux's global environment holds %s", k)
		}
		if strings.Contains(string(environ), v) {
			t.Errorf("the king session's process environment holds %s", k)
		}
	}
}
