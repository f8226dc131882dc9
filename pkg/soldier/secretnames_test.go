package soldier

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// SecretNames must give the redactor every name config.SecretEnvNamesWith
// gives it that the environment holds, whether or not it skipped parsing
// chamberlain.yaml and envoy.yaml.
func TestSecretNames_SameSecretsAsTheFullConfigForTheEnvironment(t *testing.T) {
	environ := []string{"PATH=/usr/bin:/bin", "_=/usr/bin/env", "HOME=/root/home", "DASH_KEY=dashboard-secret",
		"BOT_T=xoxb-123456", "APP_T=xapp-123456", "OPS_SECRET=ops-secret-value", "SHORT=abc"}
	sys := config.DefaultSystem()
	sys.Runtime.SecretEnv = []string{"OPS_SECRET"}
	for _, c := range []struct {
		name, chamberlain, envoy string
		want                     []string // names of environ that must be secret
	}{
		{"no files", "", "", []string{"OPS_SECRET"}},
		{"files naming nothing of the environment",
			"thresholds:\n  cpu_yellow: 100 # PATHS and HOMEs are words here\n", "slack:\n  default_channel: \"#x\"\n", []string{"OPS_SECRET"}},
		{"the dashboard token", "http:\n  token_env: DASH_KEY\n", "", []string{"OPS_SECRET", "DASH_KEY"}},
		{"the Slack tokens, quoted", "", "slack:\n  bot_token_env: \"BOT_T\"\n  app_token_env: 'APP_T'\n", []string{"OPS_SECRET", "BOT_T", "APP_T"}},
		{"a name spelled with an escape", "http:\n  token_env: \"DASH\\x5fKEY\"\n", "", []string{"OPS_SECRET", "DASH_KEY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.chamberlain != "" {
				os.WriteFile(filepath.Join(dir, config.ChamberlainFile), []byte(c.chamberlain), 0o600)
			}
			if c.envoy != "" {
				os.WriteFile(filepath.Join(dir, config.EnvoyFile), []byte(c.envoy), 0o600)
			}
			got, full := SecretNames(sys, dir, environ), config.SecretEnvNamesWith(sys, dir)
			for _, kv := range environ {
				k, _, _ := strings.Cut(kv, "=")
				if slices.Contains(got, k) != slices.Contains(full, k) {
					t.Errorf("%s: secret here %v, in the full config %v", k, slices.Contains(got, k), slices.Contains(full, k))
				}
				if slices.Contains(c.want, k) != slices.Contains(got, k) {
					t.Errorf("%s: secret %v, want %v", k, slices.Contains(got, k), slices.Contains(c.want, k))
				}
			}
		})
	}
}
