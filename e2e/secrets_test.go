package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A secret given the systemd way (in start's environment, not in
// kingdom.env) reaches the role that needs it, never through the tmux
// server's environment, and the log names its source, not its value.
func TestE2E_SecretInStartsEnvironmentReachesTheSentinel(t *testing.T) {
	gh := newFakeGitHub(t)
	gh.add(map[string]any{"id": "9001", "reason": "review_requested", "unread": true,
		"updated_at": time.Now().UTC().Format(time.RFC3339),
		"subject":    map[string]any{"title": "Secret path", "url": gh.srv.URL + "/repos/acme/app/pulls/7", "type": "PullRequest"},
		"repository": map[string]any{"full_name": "acme/app"}})
	k := NewKingdom(t, map[string]string{
		"config/sentinel.yaml": fmt.Sprintf("polling:\n  github:\n    interval_seconds: 1\n    api_url: %q\n  inbox:\n    interval_seconds: 1\n", gh.srv.URL),
		"config/system.yaml":   "watchdog:\n  interval_seconds: 1\n",
	})
	const token = "ghp_e2etesttoken0000000000"
	k.Env = []string{"GH_TOKEN=" + token}
	k.Start()
	k.WaitRoles("sentinel", "king")
	k.Eventually("the GitHub notification admitted with start's token", 30*time.Second, func() bool {
		return len(gh.markedRead()) > 0
	})
	out, err := exec.CommandContext(context.Background(), "tmux", "-L", k.Tmux.Socket, "show-environment", "-g").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "GH_TOKEN") || strings.Contains(string(out), token) {
		t.Errorf("the tmux server's environment holds the secret:\n%s", out)
	}
	log, _ := os.ReadFile(k.L.SystemLog())
	if strings.Contains(string(log), token) {
		t.Error("system.log holds the token's value")
	}
	if !strings.Contains(string(log), "GH_TOKEN (start's environment)") {
		t.Errorf("system.log does not name the token's source:\n%s", log)
	}
	fi, err := os.Stat(k.L.StartSecretsFile())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("start secrets file: %v, mode %v; want 0600", err, fi)
	}
}
