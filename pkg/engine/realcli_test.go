package engine

import (
	"bufio"
	"bytes"
	"context"
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

// realRun is one run of a real CLI (node_modules/.bin) against the fake
// model API, with a private HOME.
type realRun struct {
	lines  [][]byte
	stderr string
	code   int
}

// runReal runs engine eng with prompt on stdin, extra flags after
// Kingdom's own, against fake.
func runReal(t *testing.T, fake *modelfake.Server, eng, prompt string, extra ...string) realRun {
	t.Helper()
	bin := modelfake.FindCLI(t, eng)
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_KEY=sk-fake-openai"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	for k, v := range fake.ClaudeEnv() {
		env = append(env, k+"="+v)
	}
	var argv []string
	switch eng {
	case "codex":
		if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(fake.CodexConfig()), 0o600); err != nil {
			t.Fatal(err)
		}
		argv = CodexArgs(CodexRun{Command: bin, Extra: extra})
	default:
		argv = ClaudeArgs(ClaudeRun{Command: bin, Extra: extra})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = work, env
	cmd.Stdin = strings.NewReader(prompt)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := realRun{stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", eng, err)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		r.lines = append(r.lines, append([]byte(nil), sc.Bytes()...))
	}
	return r
}

// limitOf reads a real run the way the soldier does: the parser's signals
// and the stderr tail into a LimitWatch, resolved at now.
func limitOf(eng string, r realRun, now time.Time) (Limit, bool) {
	p := NewParser(eng)
	for _, l := range r.lines {
		p.Line(l)
	}
	w := NewLimitWatch(eng)
	for _, s := range p.Outcome().Signals {
		w.Line(s.Raw)
	}
	w.Text(r.stderr)
	return w.Limit(now, time.Hour)
}

// The real codex prints the API's reset to the minute ("try again at 8:22
// AM."); a reset in the middle of that minute must be waited for, not
// missed by up to 59 s, and a re-run that raced it must not read the same
// words as tomorrow (SPEC §10.8).
func TestRealCodex_MidMinuteResetIsNeverEarlyNorTomorrow(t *testing.T) {
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Minute).Add(30 * time.Second)
	fake.Script("SCEN-midminute", modelfake.Always(modelfake.Limit(fmt.Sprintf(
		`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":%d}}`,
		reset.Unix()), nil)))
	r := runReal(t, fake, "codex", "SCEN-midminute edit")
	if n := len(fake.Requests("SCEN-midminute")); n == 0 {
		t.Fatalf("codex never asked the fake; stderr: %s", r.stderr)
	}
	// The CLI's words carry no seconds (had it given the epoch, this test
	// would prove nothing about the text).
	var words string
	for _, l := range r.lines {
		if strings.Contains(string(l), "try again at") {
			words = string(l)
		}
	}
	if words == "" || strings.Contains(words, fmt.Sprint(reset.Unix())) {
		t.Fatalf("codex did not name the reset as a clock time: %q", r.lines)
	}
	for _, c := range []struct {
		name    string
		now     time.Time
		atLeast time.Time
		atMost  time.Time
	}{
		{"first run, hours ahead", time.Now(), reset, reset.Add(time.Minute)},
		{"re-run inside the named minute, before the reset", reset.Add(-20 * time.Second), reset, reset.Add(time.Minute)},
		{"re-run just after the named minute", reset.Add(40 * time.Second), reset.Add(40*time.Second + MinLimitPause), reset.Add(40*time.Second + MinLimitPause)},
	} {
		lim, ok := limitOf("codex", r, c.now)
		if !ok || !lim.Parsed {
			t.Fatalf("%s: limit %+v ok=%v, want a parsed reset from %q", c.name, lim, ok, words)
		}
		if lim.ResetsAt.Before(c.atLeast) || lim.ResetsAt.After(c.atMost) {
			t.Errorf("%s: resets at %s, want within [%s, %s] (the API's reset is %s)", c.name,
				lim.ResetsAt.Format(time.RFC3339), c.atLeast.Format(time.RFC3339), c.atMost.Format(time.RFC3339), reset.Format(time.RFC3339))
		}
	}
}

// classifyReal classifies a real run the way the soldier does.
func classifyReal(eng string, r realRun) Failure {
	p := NewParser(eng)
	for _, l := range r.lines {
		p.Line(l)
	}
	return Classify(eng, false, r.code, p.Outcome(), r.stderr, "system.yaml")
}

// With Kingdom's default claude args, an agent whose command no allowed
// Bash pattern covers is denied and gives up; the NoResult error names the
// denial and the pattern to add (SPEC §10.3).
func TestRealClaude_NoResultCarriesPermissionDenialsAndThePattern(t *testing.T) {
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	fake.Script("SCEN-denied", modelfake.Turns(modelfake.Shell("printenv KINGDOM_TASK_ID"),
		modelfake.Text("I could not read the task id.")))
	r := runReal(t, fake, "claude", "SCEN-denied do it", config.DefaultClaudeArgs...)
	f := classifyReal("claude", r)
	msg := Bound(f.Message())
	if f.Reason != doc.ReasonNoResult {
		t.Fatalf("reason %s (%q), want NoResult", f.Reason, msg)
	}
	for _, want := range []string{"permission denied: Bash(printenv KINGDOM_TASK_ID)", "I could not read the task id.",
		"runtime.claude.args", "Bash(printenv:*)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

// An account without credit is refused at once, with the fix, not retried
// as an engine error (SPEC §10.4).
func TestRealClaude_CreditBalanceTooLowIsRefused(t *testing.T) {
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	fake.Script("SCEN-credit", modelfake.Always(modelfake.APIError(400, "invalid_request_error",
		"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")))
	r := runReal(t, fake, "claude", "SCEN-credit review", config.DefaultClaudeArgs...)
	f := classifyReal("claude", r)
	msg := f.Message()
	if f.Reason != doc.ReasonEngineRefused || !doc.DefaultTerminal(f.Reason) {
		t.Fatalf("reason %s (%q), want the terminal EngineRefused", f.Reason, msg)
	}
	for _, want := range []string{"Credit balance is too low", "add credits to the account or switch engine"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
