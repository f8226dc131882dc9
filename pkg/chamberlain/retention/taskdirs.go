package retention

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// cleanTaskDirs removes workspace/<general>/tasks/<task>/ directories older
// than cutoff whose task is neither pending nor in progress and that no
// resume borrows.
func (c *Cleaner) cleanTaskDirs(cutoff time.Time) (int, error) {
	borrowed := c.borrowedTaskDirs()
	return c.removeEach("tasks", func(dir string, e os.DirEntry) (bool, error) {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return false, nil
		}
		if c.tasks.Exists(layout.InProgress, e.Name()) || c.tasks.Exists(layout.Pending, e.Name()) ||
			borrowed[filepath.Join(dir, e.Name())] {
			return false, nil
		}
		c.forgetEngineSessions(filepath.Join(dir, e.Name()), e.Name())
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return false, fmt.Errorf("remove task dir %s: %w", e.Name(), err)
		}
		return true, nil
	})
}

// removeEach calls remove for every directory in workspace/<general>/<sub>/
// of every general and returns how many it removed.
func (c *Cleaner) removeEach(sub string, remove func(dir string, e os.DirEntry) (bool, error)) (int, error) {
	gens, err := os.ReadDir(c.l.WorkspaceDir())
	if err != nil {
		return 0, nil
	}
	n := 0
	var errs []error
	for _, g := range gens {
		if !g.IsDir() {
			continue
		}
		dir := filepath.Join(c.l.WorkspaceDir(), g.Name(), sub)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			removed, err := remove(dir, e)
			if err != nil {
				errs = append(errs, err)
			} else if removed {
				n++
			}
		}
	}
	return n, errors.Join(errs...)
}

// borrowedTaskDirs are the task dirs that pending or running resume tasks
// run in (their workdir is <task dir>/repo of the task that asked, or of a
// kept conversation): retention keeps them whatever their age, since a
// resume may wait days for a usage limit to lift (SPEC §10.5, §10.8).
func (c *Cleaner) borrowedTaskDirs() map[string]bool {
	out := map[string]bool{}
	for _, st := range []string{layout.Pending, layout.InProgress} {
		ids, err := c.tasks.IDs(st)
		if err != nil {
			continue
		}
		for _, id := range ids {
			var t doc.Task
			if c.tasks.ReadJSON(st, id, &t) != nil || t.Workdir == "" {
				continue
			}
			out[filepath.Dir(filepath.Clean(t.Workdir))] = true
		}
	}
	return out
}

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
func (c *Cleaner) forgetEngineSessions(taskDir, task string) {
	env := os.Environ()
	if cd := engine.ClaudeConfigDir(env); cd != "" {
		for _, cwd := range []string{filepath.Join(taskDir, "repo"), taskDir} {
			_ = os.RemoveAll(engine.ClaudeProjectDir(cd, cwd))
		}
	}
	if !ids.Valid(task) {
		return
	}
	if id := c.sessionIDOf(task); id != "" {
		_ = engine.RemoveCodexSession(engine.CodexHome(env), id)
	}
}

// sessionIDOf is the engine session a task's attempts used, from its final
// result or its -session-id file ("" if neither says).
func (c *Cleaner) sessionIDOf(task string) string {
	if b, err := queue.ReadLimited(c.l.ResultFinal(task), queue.DefaultMaxSize); err == nil {
		var res struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(b, &res) == nil && res.SessionID != "" {
			return res.SessionID
		}
	}
	if b, err := queue.ReadLimited(c.l.ResultSessionID(task), 4096); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
