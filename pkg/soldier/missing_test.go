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

// An engine binary missing from the kingdom user's PATH: the published
// failure (the ❌) is the terminal EngineMissing naming the PATH searched,
// runtime.<engine>.command and the install (SPEC §10.4).
func TestRun_MissingEngineSaysHowToFixIt(t *testing.T) {
	base := t.TempDir()
	l := layout.New(base)
	l.Ensure()
	const task = "task-20261201-009"
	prompt := filepath.Join(base, "prompt.md")
	os.WriteFile(prompt, []byte("work"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = config.EngineCodex
	sys.Runtime.Codex.Command = "codex-not-installed-kingdom"
	t.Setenv("PATH", "/usr/bin:/bin")
	o := RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-x",
		PromptFile: prompt, Workdir: t.TempDir(), SoldierID: "soldier-1-cc"}, System: sys, Environ: os.Environ()}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	m := readRaw(t, l.ResultRaw(task))
	msg, _ := m["error"].(string)
	if m["error_reason"] != doc.ReasonEngineMissing || !doc.DefaultTerminal(doc.ReasonEngineMissing) {
		t.Fatalf("raw result %v, want the terminal EngineMissing", m)
	}
	for _, want := range []string{"codex-not-installed-kingdom", "on the PATH /usr/bin:/bin", "runtime.codex.command in system.yaml", "npm install -g @openai/codex"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
