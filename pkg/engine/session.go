package engine

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// ErrBadSession is matched by errors for a resume token or session id that
// is not of the engine's form: it never reaches an argv (SPEC §10.5).
var ErrBadSession = errors.New("malformed session id")

// uuidRE is the form of claude session ids and codex thread ids.
var uuidRE = lazyRE(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// CheckSessionID validates a resume token of engine: claude session ids
// and codex thread ids are UUIDs. The command engine takes no token.
func CheckSessionID(engine, id string) error {
	switch engine {
	case config.EngineClaude, config.EngineCodex:
		if uuidRE().MatchString(id) {
			return nil
		}
		return fmt.Errorf("%s resume token %q is not a UUID: %w", engine, redact.Clip(id, 80), ErrBadSession)
	}
	return fmt.Errorf("engine %s has no sessions: %w", engine, ErrBadSession)
}

// NewSessionID returns a random (version 4) UUID for claude's --session-id.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ClaudeConfigDir is where claude keeps its state for an environment in
// os.Environ form: $CLAUDE_CONFIG_DIR, else $HOME/.claude ("" if neither).
func ClaudeConfigDir(env []string) string {
	if d := Getenv(env, "CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	if h := Getenv(env, "HOME"); h != "" {
		return filepath.Join(h, ".claude")
	}
	return ""
}

// ClaudeProjectDir is the directory claude keeps the sessions of cwd in:
// <config dir>/projects/<cwd with every non-alphanumeric byte as '-'>.
func ClaudeProjectDir(configDir, cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return filepath.Join(configDir, "projects", string(b))
}

// RemoveClaudeSession deletes session id's transcript (and its sidecar
// directory) from cwd's project directory, and the project directory when
// nothing else is left in it (SPEC §10.5: the session store goes with the
// task). A transcript not where cwd says (a symlinked or very long path the
// CLI names its own way) is found by its id, which is unique. A malformed
// id removes nothing.
func RemoveClaudeSession(configDir, cwd, id string) error {
	if configDir == "" || !uuidRE().MatchString(id) {
		return nil
	}
	dirs := []string{ClaudeProjectDir(configDir, cwd)}
	if real, err := filepath.EvalSymlinks(cwd); err == nil && real != cwd {
		dirs = append(dirs, ClaudeProjectDir(configDir, real))
	}
	if !slices.ContainsFunc(dirs, func(d string) bool {
		_, err := os.Stat(filepath.Join(d, id+".jsonl"))
		return err == nil
	}) {
		if m, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", id+".jsonl")); len(m) > 0 {
			dirs = append(dirs, filepath.Dir(m[0]))
		}
	}
	var errs []error
	for _, dir := range dirs {
		for _, p := range []string{filepath.Join(dir, id+".jsonl"), filepath.Join(dir, id)} {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		// The project dir is per task cwd; only claude's own bookkeeping
		// (an empty memory dir) may remain.
		_ = os.Remove(filepath.Join(dir, "memory"))
		_ = os.Remove(dir)
	}
	return errors.Join(errs...)
}

// CodexHome is where codex keeps its state for an environment in
// os.Environ form: $CODEX_HOME, else $HOME/.codex ("" if neither).
func CodexHome(env []string) string {
	if d := Getenv(env, "CODEX_HOME"); d != "" {
		return d
	}
	if h := Getenv(env, "HOME"); h != "" {
		return filepath.Join(h, ".codex")
	}
	return ""
}

// RemoveCodexSession deletes thread id's rollout files
// (<home>/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl). A malformed id
// removes nothing.
func RemoveCodexSession(home, id string) error {
	if home == "" || !uuidRE().MatchString(id) {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"))
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
