package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Engines.
const (
	EngineClaude  = "claude"
	EngineCodex   = "codex"
	EngineCommand = "command"
)

// Engines lists the valid values of runtime.engine and a manifest's engine.
var Engines = []string{EngineClaude, EngineCodex, EngineCommand}

// Placeholders are the words runtime.command.argv may contain; the engine
// replaces each with the task's value.
var Placeholders = []string{"{prompt_file}", "{workdir}", "{task_id}", "{result_path}"}

// System is system.yaml: the engine soldiers run, git, start's watchdog,
// logs and the store.
type System struct {
	Runtime  Runtime  `yaml:"runtime"`
	Git      Git      `yaml:"git"`
	Watchdog Watchdog `yaml:"watchdog"`
	Log      Log      `yaml:"log"`
	Store    Store    `yaml:"store"`
}

// Runtime selects and configures the soldier engine.
type Runtime struct {
	Engine  string        `yaml:"engine" check:"oneof=claude|codex|command"`
	Claude  ClaudeEngine  `yaml:"claude"`
	Codex   CodexEngine   `yaml:"codex"`
	Command CommandEngine `yaml:"command"`
	// EnvPassthrough names the only environment variables (beside KINGDOM_*)
	// an engine sees (SPEC §9.17). No GitHub, Jira or Slack token, nor any
	// other secret, may be named; of the model credentials only the one of
	// the engine in use reaches it (SPEC §12.3).
	EnvPassthrough []string `yaml:"env_passthrough"`
	// SecretEnv names more variables whose values are secrets: the one
	// redactor matches their values exactly, like GH_TOKEN's (SPEC §10.14).
	SecretEnv []string `yaml:"secret_env"`

	// UsageLimitFallbackMinutes is how long an engine is paused after a
	// usage limit whose reset time it did not name (SPEC §10.8).
	UsageLimitFallbackMinutes int `yaml:"usage_limit_fallback_minutes" check:"min=1,max=10080"`
}

// ClaudeEngine runs `claude -p` (SPEC §9.16).
type ClaudeEngine struct {
	Command string   `yaml:"command" check:"nonempty"`
	Model   string   `yaml:"model"` // empty: the CLI's default
	Args    []string `yaml:"args"`  // appended after Kingdom's own flags
}

// CodexEngine runs `codex exec` (SPEC §10.10).
type CodexEngine struct {
	Command string `yaml:"command" check:"nonempty"`
	Model   string `yaml:"model"`
	// Args are exec-level flags placed before `resume`, so a resumed run
	// gets them again (its sandbox above all).
	Args []string `yaml:"args"`
	// Pricing prices codex's tokens (codex reports no cost, SPEC §10.6);
	// nil: unpriced, cost_usd stays null and the tokens still count.
	Pricing *CodexPricing `yaml:"pricing"`
}

// CodexPricing is USD per million tokens.
type CodexPricing struct {
	InputPerMTok       float64 `yaml:"input_per_mtok" check:"min=0,max=10000"`
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok" check:"min=0,max=10000"`
	OutputPerMTok      float64 `yaml:"output_per_mtok" check:"min=0,max=10000"`
}

// DefaultClaudeArgs work as root and as a dedicated user (SPEC §10.4):
// bypassPermissions is refused as root, acceptEdits lets the agent edit
// files in its cwd, and the allowed Bash pattern lets it run git. Not gh:
// the agent holds no GitHub write token and asks for side effects as
// outputs of its result, which the general carries out (SPEC §12.3). The
// result comes back as structured output, so nothing must be written
// outside the cwd.
var DefaultClaudeArgs = []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash(git:*)"}

// DefaultCodexArgs let the agent write in its cwd (the task's repo); the
// codex default is read-only. The sandbox has no network: Kingdom adds
// sandbox_workspace_write.network_access=false after these, unless the
// manifest sets engine_network (SPEC §12.3).
var DefaultCodexArgs = []string{"--sandbox", "workspace-write"}

// GitHubTokenEnv are the variables that hold the GitHub write token (the
// sentinel's and the general's): never a soldier's (SPEC §12.3).
var GitHubTokenEnv = []string{"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"}

// IsServiceCredential reports whether the variable name holds a GitHub,
// Jira or Slack credential: runtime.env_passthrough may not name one.
func IsServiceCredential(name string) bool {
	return slices.Contains(GitHubTokenEnv, name) || strings.HasPrefix(name, "SLACK_") || strings.HasPrefix(name, "JIRA_")
}

// ModelCredentialEnv are the variables engine reaches its model with: the
// only credentials its soldier's environment may carry (SPEC §12.3); none
// for the command engine.
func ModelCredentialEnv(engine string) []string {
	switch engine {
	case EngineClaude:
		return []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}
	case EngineCodex:
		return []string{"OPENAI_API_KEY"}
	}
	return nil
}

func isModelCredential(name string) bool {
	return slices.Contains(ModelCredentialEnv(EngineClaude), name) || slices.Contains(ModelCredentialEnv(EngineCodex), name)
}

// CommandEngine runs any argv with Placeholders substituted.
type CommandEngine struct {
	Argv []string `yaml:"argv"`
}

// Git configures cloning.
type Git struct {
	CloneURL string `yaml:"clone_url" check:"nonempty"` // {repo} is owner/name
}

// Watchdog configures start's supervision of role sessions.
type Watchdog struct {
	IntervalSeconds  int       `yaml:"interval_seconds" check:"min=1,max=86400"`
	CrashLoop        CrashLoop `yaml:"crash_loop"`
	StopGraceSeconds int       `yaml:"stop_grace_seconds" check:"min=0,max=3600"`
}

// CrashLoop: a role that died MaxRestarts times within WindowMinutes is not
// restarted again.
type CrashLoop struct {
	MaxRestarts   int `yaml:"max_restarts" check:"min=1,max=1000"`
	WindowMinutes int `yaml:"window_minutes" check:"min=1,max=10080"`
}

// Log configures the human-readable logs.
type Log struct {
	Level string `yaml:"level" check:"oneof=debug|info|warn|error"`
}

// DefaultSystem returns system.yaml's defaults.
func DefaultSystem() *System {
	return &System{
		Runtime: Runtime{
			Engine:  EngineClaude,
			Claude:  ClaudeEngine{Command: "claude", Args: append([]string(nil), DefaultClaudeArgs...)},
			Codex:   CodexEngine{Command: "codex", Args: append([]string(nil), DefaultCodexArgs...)},
			Command: CommandEngine{Argv: []string{}},
			EnvPassthrough: []string{
				"PATH", "HOME", "LANG", "TZ",
				"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY",
			},
			SecretEnv:                 []string{},
			UsageLimitFallbackMinutes: 60,
		},
		Git: Git{CloneURL: "https://github.com/{repo}.git"},
		Watchdog: Watchdog{
			IntervalSeconds:  60,
			CrashLoop:        CrashLoop{MaxRestarts: 5, WindowMinutes: 10},
			StopGraceSeconds: 10,
		},
		Log:   Log{Level: "info"},
		Store: DefaultStore(),
	}
}

// LoadSystem loads system.yaml; a missing file means defaults.
func LoadSystem(path string) (*System, error) {
	c := DefaultSystem()
	if _, err := loadRole(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

var placeholderRE = regexp.MustCompile(`\{[A-Za-z_]+\}`)

// Validate checks every key of s.
func (s *System) Validate() error {
	var p problems
	checkRules(reflect.ValueOf(s), "", &p)
	if s.Runtime.Engine == EngineCommand && len(s.Runtime.Command.Argv) == 0 {
		p.add("runtime.command.argv", "expected a non-empty list when runtime.engine is command")
	}
	validateArgv(s.Runtime.Command.Argv, &p)
	for i, name := range s.Runtime.EnvPassthrough {
		key := fmt.Sprintf("runtime.env_passthrough[%d]", i)
		switch {
		case !envNameRE.MatchString(name):
			p.add(key, "expected an environment variable name, got %q", name)
		case IsServiceCredential(name):
			// SPEC §12.3: the agent holds no keys.
			p.add(key, "expected a variable that is not a GitHub, Jira or Slack credential (the agent holds no keys; a read-only GitHub token goes in a manifest's github.read_token_env), got %q", name)
		case isModelCredential(name):
			// An engine's model key may be a secret_env too (kept out of
			// tmux): passing it to the soldier is what it is for.
		case slices.Contains(s.Runtime.SecretEnv, name) || name == s.Store.DSNEnv || name == DefaultDSNEnv:
			p.add(key, "expected a variable that is not a secret (runtime.secret_env or store.dsn_env names it), got %q", name)
		}
	}
	for i, name := range s.Runtime.SecretEnv {
		if !envNameRE.MatchString(name) {
			p.add(fmt.Sprintf("runtime.secret_env[%d]", i), "expected an environment variable name, got %q", name)
		}
	}
	if u := s.Git.CloneURL; u != "" && !strings.Contains(u, "{repo}") {
		p.add("git.clone_url", "expected a URL containing {repo}, got %q", u)
	}
	s.Store.validate(&p)
	return p.err()
}

func validateArgv(argv []string, p *problems) {
	for i, arg := range argv {
		for _, ph := range placeholderRE.FindAllString(arg, -1) {
			if !slices.Contains(Placeholders, ph) {
				p.add(fmt.Sprintf("runtime.command.argv[%d]", i), "unknown placeholder %s (known: %s)", ph, strings.Join(Placeholders, " "))
			}
		}
	}
}

// EngineFor returns the engine a general's soldiers run: the manifest's
// override, else runtime.engine. m may be nil.
func (s *System) EngineFor(m *Manifest) string {
	if m != nil && m.Engine != "" {
		return m.Engine
	}
	return s.Runtime.Engine
}

// WatchdogInterval is how often start checks the role sessions.
func (s *System) WatchdogInterval() time.Duration { return seconds(s.Watchdog.IntervalSeconds) }

// CrashLoopWindow is the window in which MaxRestarts deaths stop restarts.
func (s *System) CrashLoopWindow() time.Duration { return minutes(s.Watchdog.CrashLoop.WindowMinutes) }

// StopGrace is how long a role gets after SIGTERM before it is killed.
func (s *System) StopGrace() time.Duration { return seconds(s.Watchdog.StopGraceSeconds) }

// UsageLimitFallback is the pause after a usage limit without a reset time.
func (s *System) UsageLimitFallback() time.Duration {
	return minutes(s.Runtime.UsageLimitFallbackMinutes)
}
