package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

func fakeCLI(t *testing.T, version string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cli")
	// A constant script: prints a version line like the real CLIs.
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+version+"'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func findCheck(cs []Check, suffix string) *Check {
	for i := range cs {
		if strings.HasSuffix(cs[i].Name, suffix) {
			return &cs[i]
		}
	}
	return nil
}

func TestDoctor_BypassAsRootFailsNamingTheFix(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = fakeCLI(t, "2.1.328 (Claude Code)")
	env := DoctorEnv{Environ: []string{"HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=sk-ant-x"}, UID: 0, SysFile: "/b/config/system.yaml"}
	cs := Doctor(context.Background(), sys, "claude", env)
	for _, c := range cs {
		if !c.OK {
			t.Errorf("default config as root: %+v", c)
		}
	}
	if c := findCheck(cs, "binary"); c == nil || !strings.Contains(c.Info, "2.1.328 (Claude Code)") {
		t.Errorf("binary check %+v", c)
	}
	sys.Runtime.Claude.Args = []string{"--permission-mode", "bypassPermissions"}
	c := findCheck(Doctor(context.Background(), sys, "claude", env), "permission mode")
	if c == nil || c.OK || !strings.Contains(c.Fix, "acceptEdits") || !strings.Contains(c.Fix, "/b/config/system.yaml") {
		t.Fatalf("bypass as root: %+v", c)
	}
	env.UID = 1000
	if c := findCheck(Doctor(context.Background(), sys, "claude", env), "permission mode"); c == nil || !c.OK {
		t.Fatalf("bypass as a dedicated user is fine: %+v", c)
	}
}

func TestDoctor_Credentials(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Codex.Command = fakeCLI(t, "codex-cli 0.169.0")
	home := t.TempDir()
	env := DoctorEnv{Environ: []string{"HOME=" + home}, SysFile: "system.yaml"}
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "credentials"); c == nil || c.OK || !strings.Contains(c.Fix, "OPENAI_API_KEY") {
		t.Fatalf("no credentials: %+v", c)
	}
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte(`{"tokens":{}}`), 0o600)
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "credentials"); c == nil || !c.OK {
		t.Fatalf("codex login: %+v", c)
	}
	sys.Runtime.EnvPassthrough = []string{"PATH", "HOME"}
	env.Environ = append(env.Environ, "OPENAI_API_KEY=sk-x")
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "credentials"); c == nil || c.OK || !strings.Contains(c.Info, "not in runtime.env_passthrough") {
		t.Fatalf("key not passed through: %+v", c)
	}
	sys.Runtime.Codex.Command = filepath.Join(t.TempDir(), "nope")
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "binary"); c == nil || c.OK || !strings.Contains(c.Fix, "@openai/codex") {
		t.Fatalf("missing binary: %+v", c)
	}
}

// The kingdom user's ~/.claude/settings.json is named as overridden (SPEC
// §12.3); an apiKeyHelper there, which soldiers never run, fails with the
// fix.
func TestDoctor_UserSettingsNamedAsOverridden(t *testing.T) {
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = fakeCLI(t, "2.1.328 (Claude Code)")
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	env := DoctorEnv{Environ: []string{"HOME=" + home, "ANTHROPIC_API_KEY=sk-ant-x"}, UID: 1000, SysFile: "/b/config/system.yaml"}
	if c := findCheck(Doctor(context.Background(), sys, "claude", env), "user settings"); c != nil {
		t.Fatalf("no settings file, yet %+v", c)
	}
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"env":{"ANTHROPIC_BASE_URL":"http://x"},"model":"opus"}`), 0o600)
	c := findCheck(Doctor(context.Background(), sys, "claude", env), "user settings")
	if c == nil || !c.OK || !strings.Contains(c.Info, "env, model: overridden") {
		t.Fatalf("env and model: %+v", c)
	}
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"apiKeyHelper":"/usr/local/bin/key"}`), 0o600)
	c = findCheck(Doctor(context.Background(), sys, "claude", env), "user settings")
	if c == nil || c.OK || !strings.Contains(c.Fix, "kingdom.env as ANTHROPIC_API_KEY") {
		t.Fatalf("apiKeyHelper: %+v", c)
	}
}
