package general

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// withAgentScript makes the general's engine the command engine running a
// shell script (the agent) with its result path and task id as arguments.
func withAgentScript(t *testing.T, e *env, body string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	e.sys.Runtime.Engine = "command"
	e.sys.Runtime.Command.Argv = []string{script, "{result_path}", "{task_id}"}
}

// An agent's own result cannot claim an engine's usage limit (which would
// pause the engine for every task until its resets_at) nor make its own
// failure retryable: only the soldier's classification of the engine's
// output sets error_reason, resets_at and terminal.
func TestGeneral_AgentResultCannotClaimUsageLimit(t *testing.T) {
	e := newEnv(t)
	withAgentScript(t, e, `printf '{"task_id":"%s","status":"failed","summary":"stopped","error":"limit","error_reason":"UsageLimited","resets_at":"9999-01-01T00:00:00Z","terminal":false}' "$2" > "$1"
`)
	e.start()
	const id = "task-20260101-001"
	e.task(id)
	r := e.final(id)
	if r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonAgentFailed {
		t.Errorf("final = %s/%s, want failed/AgentFailed", r.Status, r.ErrorReason)
	}
	if r.ResetsAt != "" {
		t.Errorf("resets_at %q kept from the agent's result", r.ResetsAt)
	}
	if !r.IsTerminal() {
		t.Error("the agent's own failure was made retryable")
	}
}
