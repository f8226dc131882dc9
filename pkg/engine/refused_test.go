package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// A configuration codex refuses before doing any work (exit 1, nothing on
// stdout; the words measured in ENGINES.md) is the terminal EngineRefused
// with the engine's words and the fix, never an EngineError retried three
// times (SPEC §10.4, §12.4).
func TestClassify_CodexRefusedConfigurationIsTerminalEngineRefused(t *testing.T) {
	for name, stderr := range map[string]string{
		"approval_policy": "WARNING: proceeding, even though we could not create PATH aliases\nError: approval_policy = \"untrusted\" is no longer supported; remove this setting",
		"wire_api chat":   "Error loading config.toml: `wire_api = \"chat\"` is no longer supported.\nHow to fix: set `wire_api = \"responses\"` in your provider config.",
		"unknown variant": "Error loading config.toml: /home/k/.codex/config.toml:2:16: unknown variant `nope`, expected one of `read-only`, `workspace-write`, `danger-full-access`",
		"unknown field":   "Error loading config.toml:\nconfig.toml:12:1: unknown configuration field `network_access`",
	} {
		f := Classify("codex", false, 1, &Outcome{}, stderr, "/b/config/system.yaml")
		msg := f.Message()
		if f.Reason != doc.ReasonEngineRefused || !doc.DefaultTerminal(f.Reason) {
			t.Errorf("%s: reason %s (%q), want the terminal EngineRefused", name, f.Reason, msg)
		}
		last := stderr[strings.LastIndex(stderr, "\n")+1:]
		for _, want := range []string{last, "config.toml", "runtime.codex.args in /b/config/system.yaml"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q lacks %q", name, msg, want)
			}
		}
	}
	// What is not a refusal of the configuration stays what it was.
	if f := Classify("codex", true, 1, &Outcome{}, "Error: thread/resume: thread/resume failed: no rollout found for thread id 019a (code -32600)", "system.yaml"); f.Reason != doc.ReasonSessionLost {
		t.Errorf("unknown thread: %s, want SessionLost", f.Reason)
	}
	o := &Outcome{Ended: true, IsError: true, Errors: []string{"stream disconnected before completion: the model is no longer supported by this provider"}}
	if f := Classify("codex", false, 1, o, "", "system.yaml"); f.Reason != doc.ReasonEngineError {
		t.Errorf("a model API failure: %s (%q), want EngineError", f.Reason, f.Message())
	}
}

// The real codex with `approval_policy = "untrusted"` in the kingdom
// user's config.toml is refused as the soldier classifies it.
func TestRealCodex_RefusedConfigurationIsEngineRefused(t *testing.T) {
	bin := modelfake.FindCLI(t, "codex")
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	home := refusingCodexHome(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := CodexArgs(CodexRun{Command: bin})
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_KEY=sk-fake-openai"}
	cmd.Stdin = strings.NewReader("SCEN-refused review")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("codex with a refused config: %v (stderr %q)", err, stderr.String())
	}
	r := realRun{stderr: stderr.String(), code: ee.ExitCode()}
	for _, l := range bytes.Split(stdout.Bytes(), []byte("\n")) {
		r.lines = append(r.lines, l)
	}
	f := classifyReal("codex", r)
	msg := f.Message()
	if f.Reason != doc.ReasonEngineRefused {
		t.Fatalf("reason %s (%q), want EngineRefused", f.Reason, msg)
	}
	if !strings.Contains(msg, `approval_policy = "untrusted" is no longer supported`) || !strings.Contains(msg, "config.toml") {
		t.Errorf("error %q lacks the engine's words or the fix", msg)
	}
	if n := len(fake.Requests("SCEN-refused")); n != 0 {
		t.Errorf("codex called the model %d times before refusing", n)
	}
}

func refusingCodexHome(t *testing.T, fake *modelfake.Server) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := "approval_policy = \"untrusted\"\n" + fake.CodexConfig()
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// `start doctor` finds the refused configuration right after the binary,
// in codex's words, with the fix; a configuration codex loads passes.
func TestDoctor_CodexRefusedConfigurationFoundFirst(t *testing.T) {
	p := filepath.Join(t.TempDir(), "codex")
	// Like codex 0.169: --version reads no configuration, `login status`
	// refuses the file (and is handed the -c overrides of the args).
	script := `#!/bin/sh
case "$*" in
--version) echo 'codex-cli 0.169.0' ;;
*"login status") echo "args: $*" >"$HOME/args"
  if grep -q untrusted "$HOME/.codex/config.toml"; then
    echo 'WARNING: proceeding, even though we could not create PATH aliases' >&2
    echo 'Error loading configuration: approval_policy = "untrusted" is no longer supported; remove this setting' >&2; exit 1
  fi
  echo 'Not logged in' >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(p, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	sys := config.DefaultSystem()
	sys.Runtime.Codex.Command = p
	sys.Runtime.Codex.Args = append(sys.Runtime.Codex.Args, "-c", "model=\"o3\"")
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	conf := filepath.Join(home, ".codex", "config.toml")
	os.WriteFile(conf, []byte("approval_policy = \"untrusted\"\n"), 0o600)
	env := DoctorEnv{Environ: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_KEY=sk-x"}, SysFile: "/b/config/system.yaml"}
	cs := Doctor(context.Background(), sys, "codex", env)
	if len(cs) < 2 || !strings.HasSuffix(cs[1].Name, "configuration") {
		t.Fatalf("checks %+v: the configuration is not checked right after the binary", cs)
	}
	c := cs[1]
	if c.OK || !strings.Contains(c.Info, conf) || !strings.Contains(c.Info, `approval_policy = "untrusted" is no longer supported`) ||
		strings.Contains(c.Info, "WARNING") || !strings.Contains(c.Fix, "runtime.codex.args in /b/config/system.yaml") {
		t.Fatalf("refused configuration: %+v", c)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "args")); !strings.Contains(string(b), `-c model="o3" login status`) {
		t.Errorf("login status ran with %q, want the -c overrides of runtime.codex.args", b)
	}
	os.WriteFile(conf, []byte("model = \"o3\"\n"), 0o600)
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "configuration"); c == nil || !c.OK {
		t.Fatalf("a configuration codex loads (not logged in is the credentials check's): %+v", c)
	}
}

// The same against the real codex CLI.
func TestRealCodex_DoctorFindsTheRefusedConfiguration(t *testing.T) {
	bin := modelfake.FindCLI(t, "codex")
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	home := refusingCodexHome(t, fake)
	sys := config.DefaultSystem()
	sys.Runtime.Codex.Command = bin
	env := DoctorEnv{Environ: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_KEY=sk-x"}, SysFile: "system.yaml"}
	c := findCheck(Doctor(context.Background(), sys, "codex", env), "configuration")
	if c == nil || c.OK || !strings.Contains(c.Info, `approval_policy = "untrusted" is no longer supported`) {
		t.Fatalf("refused configuration: %+v", c)
	}
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(fake.CodexConfig()), 0o600)
	if c := findCheck(Doctor(context.Background(), sys, "codex", env), "configuration"); c == nil || !c.OK {
		t.Fatalf("the fake's configuration: %+v", c)
	}
}

// An engine binary missing from the PATH: the failure names the PATH
// searched, runtime.<engine>.command and how to install the CLI.
func TestMissing_NamesThePathTheCommandSettingAndTheInstall(t *testing.T) {
	for eng, want := range map[string][]string{
		"claude":  {"runtime.claude.command in /b/config/system.yaml", "npm install -g @anthropic-ai/claude-code"},
		"codex":   {"runtime.codex.command in /b/config/system.yaml", "npm install -g @openai/codex"},
		"command": {"runtime.command.argv in /b/config/system.yaml"},
	} {
		err := fmt.Errorf("engine %s: %q: %w", eng, eng, ErrMissing)
		f := Missing(eng, err, "/usr/bin:/bin", "/b/config/system.yaml")
		msg := f.Message()
		if f.Reason != doc.ReasonEngineMissing || !doc.DefaultTerminal(f.Reason) {
			t.Errorf("%s: reason %s", eng, f.Reason)
		}
		for _, w := range append(want, "engine executable not found", "on the PATH /usr/bin:/bin", "PATH of the user Kingdom runs as") {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", eng, msg, w)
			}
		}
	}
	sys := config.DefaultSystem()
	sys.Runtime.Claude.Command = "no-such-claude-kingdom"
	c := findCheck(Doctor(context.Background(), sys, "claude", DoctorEnv{SysFile: "system.yaml"}), "binary")
	if c == nil || c.OK || !strings.Contains(c.Info, "on the PATH "+os.Getenv("PATH")) || !strings.Contains(c.Fix, "runtime.claude.command") {
		t.Fatalf("doctor, missing binary: %+v", c)
	}
}
