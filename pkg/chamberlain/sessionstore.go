package chamberlain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// forgetEngineSessions removes what the engines stored for a task whose
// directory retention removes (SPEC §10.5: the session store goes with the
// task dir). The soldier already removes it when nothing will resume the
// session; this covers the rest: a question never answered, a conversation
// that went quiet, a soldier killed before it could clean up.
//
// claude keeps one project directory per working directory (the task's
// repo/), so that whole directory goes; codex's rollout is found by the
// thread id the task's final result or -session-id file recorded. The
// chamberlain runs with the HOME soldiers get (start launches every role
// from the same environment).
func (r *Role) forgetEngineSessions(taskDir, task string) {
	env := os.Environ()
	if cd := engine.ClaudeConfigDir(env); cd != "" {
		for _, cwd := range []string{filepath.Join(taskDir, "repo"), taskDir} {
			_ = os.RemoveAll(engine.ClaudeProjectDir(cd, cwd))
		}
	}
	if !ids.Valid(task) {
		return
	}
	if id := r.sessionIDOf(task); id != "" {
		_ = engine.RemoveCodexSession(engine.CodexHome(env), id)
	}
}

// sessionIDOf is the engine session a task's attempts used, from its final
// result or its -session-id file ("" if neither says).
func (r *Role) sessionIDOf(task string) string {
	if b, err := queue.ReadLimited(r.l.ResultFinal(task), queue.DefaultMaxSize); err == nil {
		var res struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(b, &res) == nil && res.SessionID != "" {
			return res.SessionID
		}
	}
	if b, err := queue.ReadLimited(r.l.ResultSessionID(task), 4096); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
