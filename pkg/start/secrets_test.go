package start

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
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
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	w, _, tc := newWatchdog(t, fakeBins(t), c, "gen-pr")
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
