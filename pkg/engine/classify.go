package engine

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Failure is why a run that left no result failed.
type Failure struct {
	Reason string // doc.Reason*
	// Words is what the engine said (its reason, SPEC §10.3), unredacted.
	Words string
	// Fix tells the operator what to change (refusals), "" otherwise.
	Fix string
}

// Message is the failure as one text: the words, then the fix.
func (f Failure) Message() string {
	if f.Fix == "" {
		return f.Words
	}
	if f.Words == "" {
		return "fix: " + f.Fix
	}
	return f.Words + " — fix: " + f.Fix
}

// refusal is one way an engine refuses its configuration.
type refusal struct {
	engine string // "" = any
	re     func() *regexp.Regexp
	fix    func(sysFile string) string
}

// bypassAsRootFix and credentialsFix are the fixes both a refusal at run
// time and `start doctor` name (SPEC §10.4: the same cases, the same words).
func bypassAsRootFix(sysFile string) string {
	return "bypassPermissions is refused as root: use `--permission-mode acceptEdits` (the default) in runtime.claude.args of " + sysFile + ", or run Kingdom as a dedicated user"
}

func credentialsFix(eng, sysFile string) string {
	key, login := "ANTHROPIC_API_KEY", "claude /login"
	if eng == config.EngineCodex {
		key, login = "OPENAI_API_KEY", "codex login"
	}
	return "set " + key + " in kingdom.env and keep it in runtime.env_passthrough of " + sysFile + ", or run `" + login + "` as the user Kingdom runs as"
}

var refusals = []refusal{
	{config.EngineClaude, lazyRE(`cannot be used with root/sudo privileges`), bypassAsRootFix},
	{config.EngineClaude, lazyRE(`(?i)error: unknown option|error: too many arguments|error: option .* argument missing`), func(f string) string {
		return "remove or correct the flag in runtime.claude.args of " + f
	}},
	{config.EngineClaude, lazyRE(`(?i)not logged in|please run /login|invalid api key|authentication_error|invalid x-api-key`), func(f string) string {
		return credentialsFix(config.EngineClaude, f)
	}},
	// An exhausted account is terminal like missing credentials: a retry
	// within seconds meets the same empty balance.
	{config.EngineClaude, lazyRE(`(?i)credit balance is too low`), func(f string) string {
		return "the account has no credit left: add credits to the account or switch engine (the general's engine, or runtime.engine in " + f + ")"
	}},
	// codex refuses a config.toml it cannot load before doing any work
	// (exit 1, nothing on stdout; ENGINES.md): retrying meets the same file.
	{config.EngineCodex, codexConfigRefused, codexConfigFix},
	{config.EngineCodex, lazyRE(`error: unexpected argument|error: invalid value|error: unrecognized subcommand`), func(f string) string {
		return "remove or correct the flag in runtime.codex.args of " + f
	}},
	{config.EngineCodex, lazyRE(`(?i)missing environment variable: .?OPENAI_API_KEY|not logged in|codex login|401 unauthorized|incorrect api key`), func(f string) string {
		return credentialsFix(config.EngineCodex, f)
	}},
}

// codexConfigRefused matches codex refusing its configuration: `Error:
// approval_policy = "untrusted" is no longer supported; remove this
// setting` (exec), `Error loading config.toml: …` / `Error loading
// configuration: …` (an unknown variant, a removed `wire_api = "chat"`),
// `unknown configuration field`.
var codexConfigRefused = lazyRE(`(?im)error loading config(uration|\.toml)|failed to load configuration|^error: .*\bis no longer supported|unknown configuration field`)

// codexConfigFix is the fix of a refused codex configuration, at run time
// and in `start doctor` alike.
func codexConfigFix(sysFile string) string {
	return "correct the setting codex names in the config.toml of the user Kingdom runs as ($CODEX_HOME/config.toml, else ~/.codex/config.toml) or in the -c overrides of runtime.codex.args in " + sysFile + ", then run `start doctor`"
}

// Missing is the failure of an engine whose executable is not found
// (EngineMissing): err is Build's ErrMissing, pathEnv the PATH that was
// searched; the fix names that PATH, runtime.<engine>.command of sysFile
// and how to install the CLI (SPEC §10.4).
func Missing(eng string, err error, pathEnv, sysFile string) Failure {
	words := err.Error()
	if pathEnv == "" {
		words += " (PATH is empty)"
	} else {
		words += " on the PATH " + pathEnv
	}
	return Failure{Reason: doc.ReasonEngineMissing, Words: words, Fix: installFix(eng, sysFile)}
}

// sessionGone matches an engine saying the resumed session does not exist.
var sessionGone = lazyRE(`(?i)no conversation found with session id|no rollout found for thread|thread not found|session not found`)

// maxReason bounds the engine's words kept in a result (SPEC §10.3).
const maxReason = 1000

// Classify names the failure of a run that left no result (SPEC §10.2–10.5):
// a refusal of the configuration is EngineRefused, a resume of a session
// that is gone SessionLost, a run that ended normally NoResult, anything
// else EngineError. stderrTail is the end of the engine's stderr; sysFile
// names system.yaml in fixes.
func Classify(engine string, resumed bool, exitCode int, o *Outcome, stderrTail, sysFile string) Failure {
	if o == nil {
		o = &Outcome{}
	}
	said := o.Reason()
	words := said
	if t := strings.TrimSpace(stderrTail); t != "" && !strings.Contains(said, t) {
		words = strings.TrimSpace(strings.Join([]string{said, "stderr: " + t}, "; "))
		words = strings.TrimPrefix(words, "; ")
	}
	all := said + "\n" + stderrTail
	for _, r := range refusals {
		if (r.engine == "" || r.engine == engine) && r.re().MatchString(all) {
			return Failure{Reason: doc.ReasonEngineRefused, Words: words, Fix: r.fix(sysFile)}
		}
	}
	if o.APIErrorStatus == 401 {
		return Failure{Reason: doc.ReasonEngineRefused, Words: words,
			Fix: "check the API key (" + credentialsOf(engine) + ") in kingdom.env"}
	}
	if resumed && sessionGone().MatchString(all) {
		return Failure{Reason: doc.ReasonSessionLost, Words: words}
	}
	// An agent blocked by its permissions often just stops: the denials
	// say why, and the fix names the pattern to allow (SPEC §10.3).
	fix := denialFix(o.Denials, sysFile)
	if o.Subtype == "error_max_structured_output_retries" || (o.Ended && !o.IsError && exitCode == 0) {
		msg := "the agent ended without giving a result"
		if d := o.denied(); d != "" {
			msg += "; " + d
		}
		if last := strings.TrimSpace(o.FinalText); last != "" {
			// Clipped so the fix still fits the 1,000 characters; the
			// result's summary carries the whole text.
			msg += "; its last words: " + redact.Clip(last, maxLastWords)
		}
		if o.Subtype == "error_max_structured_output_retries" {
			msg += " (subtype " + o.Subtype + ")"
		}
		return Failure{Reason: doc.ReasonNoResult, Words: msg, Fix: fix}
	}
	switch {
	case o.IsError && exitCode == 0:
		// claude can end is_error with exit 0: a failure all the same,
		// in the engine's own words (SPEC §12.4).
		if words == "" {
			words = "no reason given"
		}
		words = fmt.Sprintf("engine %s reported an error (is_error) though it exited with code 0: %s", engine, words)
	case words == "":
		words = fmt.Sprintf("engine %s exited with code %d without a result", engine, exitCode)
	default:
		words = fmt.Sprintf("engine %s exited with code %d: %s", engine, exitCode, words)
	}
	return Failure{Reason: doc.ReasonEngineError, Words: words, Fix: fix}
}

// maxLastWords bounds the agent's last text quoted in a NoResult message.
const maxLastWords = 400

// denialFix tells how to let the denied calls run: the --allowedTools
// patterns to add (a Bash command by its program, `Bash(printenv:*)`; any
// other tool by name) and the --add-dir directories of denied paths
// outside the task's directory. "" when there were none.
func denialFix(ds []Denial, sysFile string) string {
	var pats, dirs []string
	asked := false
	for _, d := range ds {
		switch {
		case d.Tool == "AskUserQuestion":
			asked = true
		case d.Tool == "Bash":
			if prog := commandProgram(d.Arg); prog != "" && !slices.Contains(pats, "Bash("+prog+":*)") {
				pats = append(pats, "Bash("+prog+":*)")
			}
		case fileTools[d.Tool] && filepath.IsAbs(d.Arg):
			if dir := filepath.Dir(d.Arg); !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		default:
			if !slices.Contains(pats, d.Tool) {
				pats = append(pats, d.Tool)
			}
		}
	}
	var fixes []string
	if len(pats) > 0 {
		list := strings.Join(pats, ",")
		fixes = append(fixes, "allow it in runtime.claude.args of "+sysFile+": add "+list+
			" to the --allowedTools list (comma-separated, e.g. --allowedTools \"Bash(git:*),"+list+"\")")
	}
	if len(dirs) > 0 {
		fixes = append(fixes, "let it reach the paths: add --add-dir "+strings.Join(dirs, " --add-dir ")+" to runtime.claude.args of "+sysFile)
	}
	if asked {
		fixes = append(fixes, "a headless agent cannot ask: its prompt should have it end with status needs_human and the question")
	}
	return strings.Join(fixes, "; ")
}

// fileTools are claude's tools whose argument is a path.
var fileTools = map[string]bool{"Read": true, "Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

// commandProgram is the program a shell command runs ("printenv" of
// "FOO=1 printenv KINGDOM_TASK_ID"), "" when it is not a plain name: a
// pattern is suggested only for what can be named safely.
func commandProgram(cmd string) string {
	f := strings.Fields(cmd)
	for len(f) > 0 && envAssign().MatchString(f[0]) {
		f = f[1:]
	}
	if len(f) == 0 || !programName().MatchString(f[0]) {
		return ""
	}
	return f[0]
}

var (
	envAssign   = lazyRE(`^[A-Za-z_][A-Za-z0-9_]*=`)
	programName = lazyRE(`^[A-Za-z0-9_][A-Za-z0-9_.+/-]*$`)
)

func credentialsOf(engine string) string {
	if engine == config.EngineCodex {
		return "OPENAI_API_KEY"
	}
	return "ANTHROPIC_API_KEY"
}

// Bound redacts nothing; it cuts s to the SPEC §10.3 limit of 1,000
// characters (runes), marking the cut.
func Bound(s string) string {
	return redact.Clip(s, maxReason-1)
}
