package operator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestDoctor_ChecksWhoOwnsTheTreeTheBinariesAndKingdomEnv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to nobody")
	}
	const nobody = 65534
	l := layout.New(filepath.Join(t.TempDir(), "kingdom"))
	l.Ensure()
	filepath.Walk(l.Base, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, nobody, nobody)
		}
		return nil
	})
	// What `sudo cp`, `chown -R kingdom: /opt/kingdom` and a root editor
	// leave behind.
	os.Chown(l.ConfigDir(), 0, 0)
	os.WriteFile(l.EnvFile(), []byte("GH_TOKEN=x\n"), 0o600)
	bin := l.Bin()
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "king"), []byte("#!/bin/sh\n"), 0o755)
	os.Chown(bin, nobody, nobody)
	os.Chown(filepath.Join(bin, "king"), nobody, nobody)

	var b bytes.Buffer
	PrintChecks(&b, Doctor(t.Context(), l, bin, nil))
	out := b.String()
	for _, want := range []string{
		"[FAIL] tree ownership", l.ConfigDir() + " (root)", "chown -R nobody: " + l.ConfigDir(),
		"[FAIL] binaries ownership", "/usr/local/lib/kingdom/bin",
		"[FAIL] kingdom.env owner", "chown nobody: " + l.EnvFile(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	os.Chown(l.ConfigDir(), nobody, nobody)
	os.Chown(l.EnvFile(), nobody, nobody)
	// Root-owned binaries inside the tree are still the user's to swap:
	// it owns their parent.
	os.Chown(bin, 0, 0)
	os.Chown(filepath.Join(bin, "king"), 0, 0)
	b.Reset()
	PrintChecks(&b, Doctor(t.Context(), l, bin, nil))
	if out := b.String(); !strings.Contains(out, "[FAIL] binaries ownership") || !strings.Contains(out, l.Base) {
		t.Errorf("root-owned bin/ inside nobody's tree passed:\n%s", out)
	}
	outside := filepath.Join(t.TempDir(), "lib", "bin") // root's, 0755
	os.MkdirAll(outside, 0o755)
	os.Rename(bin, outside)
	bin = outside
	b.Reset()
	PrintChecks(&b, Doctor(t.Context(), l, bin, nil))
	out = b.String()
	for _, want := range []string{"[ok  ] tree ownership", "[ok  ] binaries ownership", "[ok  ] kingdom.env owner"} {
		if !strings.Contains(out, want) {
			t.Errorf("after the fixes, doctor output lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctor_WarnsOfSlackTokensWithoutADefaultChannel(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-doctor")
	t.Setenv("SLACK_APP_TOKEN", "xapp-doctor")
	t.Setenv("SLACK_DEFAULT_CHANNEL", "")
	var b bytes.Buffer
	PrintChecks(&b, Doctor(t.Context(), l, "", nil))
	if out := b.String(); !strings.Contains(out, "[warn] slack default channel") || !strings.Contains(out, "fix: set slack.default_channel") {
		t.Fatalf("no warning for Slack tokens without a default channel:\n%s", out)
	}
	os.WriteFile(l.ConfigFile("envoy.yaml"), []byte("slack:\n  default_channel: C0123456\n"), 0o600)
	b.Reset()
	PrintChecks(&b, Doctor(t.Context(), l, "", nil))
	if out := b.String(); strings.Contains(out, "default channel") {
		t.Fatalf("warned although envoy.yaml names a channel:\n%s", out)
	}
}
