package soldier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// claude can end with exit 0 and is_error: true (ENGINES.md; its tracker
// #79500, #76867): that attempt failed, in the engine's own words, even
// when the agent left a success in its result file before the engine
// failed (SPEC §12.4).
func TestRun_ClaudeIsErrorWithExitZeroIsAFailureWithItsWords(t *testing.T) {
	base, work := t.TempDir(), t.TempDir()
	l := layout.New(base)
	l.Ensure()
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	// A stand-in claude: the agent wrote its success, then the CLI ended
	// is_error (the measured result line's shape) and exit 0.
	bin := filepath.Join(t.TempDir(), "claude")
	script := `#!/bin/sh
cat >/dev/null
printf '{"status":"success","summary":"all done"}' > "$KINGDOM_RESULT_PATH"
echo '{"type":"result","subtype":"success","is_error":true,"duration_ms":457,"num_turns":3,"result":"API Error: 500 Internal server error","session_id":"x","total_cost_usd":0.01,"usage":{"input_tokens":10,"output_tokens":2},"permission_denials":[],"terminal_reason":"api_error","api_error_status":500,"errors":[]}'
exit 0
`
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineClaude
	sys.Runtime.Claude.Command = bin
	out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: "task-20261121-041", General: "gen-x",
		PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-ie"}, System: sys, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := out.Raw["error"].(string)
	if out.Raw["status"] != doc.ResultFailed || out.Raw["error_reason"] != doc.ReasonEngineError || out.ExitCode != 0 {
		t.Fatalf("raw %v (exit %d), want a failed EngineError", out.Raw, out.ExitCode)
	}
	for _, want := range []string{"is_error", "API Error: 500 Internal server error"} {
		if !strings.Contains(e, want) {
			t.Errorf("error %q lacks %q", e, want)
		}
	}
	if out.Raw["cost_usd"] != 0.01 {
		t.Errorf("cost %v, want the run's 0.01", out.Raw["cost_usd"])
	}
}
