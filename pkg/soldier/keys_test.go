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

// SPEC §12.3: the agent holds no keys. With every token of the kingdom in
// the soldier's environment, and a system.yaml built past its validation
// that passes them all through, each engine's process gets no credential
// but its own model key (none for the command engine), and GH_TOKEN only
// as the read token its manifest lends.
func TestRun_EngineHoldsNoKeyButItsModelKey(t *testing.T) {
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent",
		"GH_TOKEN=ghp_WRITEwriteWRITEwriteWRITEwrite0001", "GITHUB_TOKEN=ghp_WRITEwriteWRITEwriteWRITEwrite0002",
		"JIRA_API_TOKEN=jira-secret-1", "JIRA_USER_EMAIL=a@b.c", "SLACK_BOT_TOKEN=xoxb-1-2", "SLACK_APP_TOKEN=xapp-1-2",
		"KINGDOM_PG_DSN=postgres://u:pw@h/db", "KINGDOM_HTTP_TOKEN=dash-secret",
		"ANTHROPIC_API_KEY=sk-ant-model", "CLAUDE_CODE_OAUTH_TOKEN=oauth-model", "OPENAI_API_KEY=sk-openai-model",
		"GEN_READ_TOKEN=ghp_READreadREADreadREADreadREAD0003"}
	secrets := []string{"ghp_WRITE", "jira-secret", "a@b.c", "xoxb-", "xapp-", "postgres://", "dash-secret"}
	for _, c := range []struct {
		engine, manifest string
		want, not        []string
	}{
		{config.EngineClaude, "", []string{"ANTHROPIC_API_KEY=sk-ant-model", "CLAUDE_CODE_OAUTH_TOKEN=oauth-model"}, []string{"sk-openai-model", "GH_TOKEN"}},
		{config.EngineCodex, "", []string{"OPENAI_API_KEY=sk-openai-model"}, []string{"sk-ant-model", "oauth-model", "GH_TOKEN"}},
		{config.EngineCommand, "", nil, []string{"sk-ant-model", "oauth-model", "sk-openai-model", "GH_TOKEN"}},
		{config.EngineClaude, "github:\n  read_token_env: GEN_READ_TOKEN\n", []string{"GH_TOKEN=ghp_READreadREADreadREADreadREAD0003"}, []string{"GITHUB_TOKEN", "GEN_READ_TOKEN="}},
	} {
		t.Run(c.engine+map[bool]string{true: "+read-token"}[c.manifest != ""], func(t *testing.T) {
			base, work := t.TempDir(), t.TempDir()
			l := layout.New(base)
			l.Ensure()
			os.WriteFile(l.GeneralManifest("gen-x"), []byte("name: gen-x\n"+c.manifest), 0o600)
			// As soldier-spawn does.
			redact.SetExtraNames(config.SecretEnvNames(l.ConfigDir()))
			t.Cleanup(func() { redact.SetExtraNames(nil) })
			dump := filepath.Join(work, "env.txt")
			script := filepath.Join(base, "engine.sh")
			os.WriteFile(script, []byte("#!/bin/sh\nenv > "+dump+"\n"), 0o700)
			sys := config.DefaultSystem()
			sys.Runtime.Engine = c.engine
			sys.Runtime.Claude.Command, sys.Runtime.Codex.Command = script, script
			sys.Runtime.Command.Argv = []string{script}
			sys.Runtime.EnvPassthrough = append(sys.Runtime.EnvPassthrough, "GH_TOKEN", "GITHUB_TOKEN", "JIRA_API_TOKEN", "JIRA_USER_EMAIL",
				"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "KINGDOM_PG_DSN", "GEN_READ_TOKEN")
			prompt := filepath.Join(base, "prompt.md")
			os.WriteFile(prompt, []byte("work"), 0o600)
			_, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: "task-20261201-001", General: "gen-x",
				PromptFile: prompt, Workdir: work, SoldierID: "soldier-1-aa"}, System: sys, Environ: environ})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(dump)
			if err != nil {
				t.Fatalf("the engine did not run: %v", err)
			}
			env := string(b)
			for _, bad := range append(secrets, c.not...) {
				if strings.Contains(env, bad) {
					t.Errorf("the %s engine's environment holds %q:\n%s", c.engine, bad, env)
				}
			}
			for _, good := range append(c.want, "KINGDOM_TASK_ID=task-20261201-001") {
				if !strings.Contains(env, good+"\n") {
					t.Errorf("the %s engine's environment lacks %q:\n%s", c.engine, good, env)
				}
			}
		})
	}
}
