package soldier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// SPEC §10.14: an agent that prints its environment (GH_TOKEN is the
// read token the manifest lends it) and puts it in its result leaves no
// token in logs/sessions/* or the raw result, and its staging result is
// removed once published.
func TestRun_SessionLogsAndRawResultAreRedactedAndStagingRemoved(t *testing.T) {
	const token = "ghtok-0123456789-plain-value"
	t.Setenv("GEN_X_READ_TOKEN", token)
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	os.WriteFile(l.GeneralManifest("gen-x"), []byte("name: gen-x\ngithub:\n  read_token_env: GEN_X_READ_TOKEN\n"), 0o600)
	// As soldier-spawn does: the manifests' read tokens are secrets.
	redact.SetExtraNames(config.SecretEnvNames(l.ConfigDir()))
	t.Cleanup(func() { redact.SetExtraNames(nil) })
	work := t.TempDir()
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCommand
	// The script is a constant; the task's values arrive as argv words. It
	// prints the token split over two writes, and to stderr.
	script := `printf 'env GH_TOKEN=%.10s' "$GH_TOKEN"; sleep 0.1; printf '%s\n' "${GH_TOKEN#??????????}"; echo "err $GH_TOKEN" >&2; ` +
		`printf '{"task_id":"%s","status":"failed","summary":"saw %s","error":"token %s"}' "$2" "$GH_TOKEN" "$GH_TOKEN" > "$1"`
	sys.Runtime.Command.Argv = []string{"/bin/sh", "-c", script, "sh", "{result_path}", "{task_id}"}
	const task = "task-20261121-001"
	out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-aa"}, System: sys, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Raw["status"] != "failed" {
		t.Fatalf("raw = %v, want the agent's failed result", out.Raw)
	}
	for _, p := range []string{l.SessionLog("soldier-1-aa"), l.SessionErr("soldier-1-aa"), l.ResultRaw(task)} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), token) {
			t.Errorf("%s holds the token:\n%s", filepath.Base(p), b)
		}
		if !strings.Contains(string(b), "[REDACTED]") {
			t.Errorf("%s has no redaction marker (did the agent print?):\n%s", filepath.Base(p), b)
		}
	}
	if _, err := os.Lstat(l.ResultStaging(task)); err == nil {
		t.Error("the staging -result.json survived its publication")
	}
}
