// Package engine knows how to invoke each soldier engine (claude, codex, or
// any command) and how to read its output (SPEC §4.6, §9.16, §9.17). It
// builds argv lists — never shell strings — and parses the engines' JSON
// lines for the resume token, usage and final text. Running the process is
// the caller's job (pkg/soldier).
//
//	inv, err := engine.Build(engine.Spec{Engine: "claude", System: sys, Workdir: dir, PromptFile: p, ...})
//	if errors.Is(err, engine.ErrMissing) { /* EngineMissing */ }
//	parser := engine.NewParser(inv.Engine)
//	for each stdout line: parser.Line(line)
//	parser.SessionID(), parser.FinalText()
package engine

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// ErrMissing is matched when the engine's executable cannot be found.
var ErrMissing = errors.New("engine executable not found")

// Spec describes one engine run.
type Spec struct {
	Engine string // claude | codex | command
	System *config.System
	Model  string // overrides the configured model (petitions)
	// Resume is the resume token of an earlier run (validated by Build).
	Resume string
	// SessionID is the claude session id the soldier chose for a new run
	// (--session-id); ignored on resume and by the other engines.
	SessionID  string
	PromptFile string
	Workdir    string
	TaskID     string
	ResultPath string
	// ResultSchema asks for the result as structured output (SPEC §10.1):
	// claude gets it as --json-schema; codex reads SchemaFile (written by
	// the caller with the strict form) and writes its last message to
	// LastMessageFile.
	ResultSchema    []byte
	SchemaFile      string
	LastMessageFile string
	// Petition locks the run down (SPEC §10.9): no tools, no session
	// persistence, never the configured args (bypass mode).
	Petition bool
	// MaxBudgetUSD is the task's budget (SPEC §10.7): claude gets it as
	// --max-budget-usd, the backstop behind the king's admission.
	MaxBudgetUSD *float64
	// Network lets codex's sandbox reach the network (the manifest's
	// engine_network); off, Kingdom turns it off whatever
	// runtime.codex.args say (SPEC §12.3).
	Network bool
}

// Invocation is a ready-to-run engine process.
type Invocation struct {
	Engine string
	Path   string   // resolved executable
	Args   []string // argv, Args[0] is the configured command
	Dir    string   // working directory
	// StdinPrompt: the prompt file is fed on stdin (claude, codex).
	StdinPrompt bool
}

// Build returns the invocation of s. A missing executable is reported as
// an error matching ErrMissing; a malformed resume token or session id as
// one matching ErrBadSession.
func Build(s Spec) (*Invocation, error) {
	if s.System == nil {
		s.System = config.DefaultSystem()
	}
	rt := s.System.Runtime
	var argv []string
	inv := &Invocation{Engine: s.Engine, Dir: s.Workdir, StdinPrompt: s.Engine != config.EngineCommand}
	switch s.Engine {
	case config.EngineClaude:
		if id := pick(s.Resume, s.SessionID); id != "" {
			if err := CheckSessionID(s.Engine, id); err != nil {
				return nil, err
			}
		}
		argv = ClaudeArgs(ClaudeRun{Command: rt.Claude.Command, Model: pick(s.Model, rt.Claude.Model), Petition: s.Petition,
			Resume: s.Resume, SessionID: s.SessionID, Schema: s.ResultSchema, MaxBudgetUSD: s.MaxBudgetUSD, Extra: rt.Claude.Args})
	case config.EngineCodex:
		if err := CheckSessionID(s.Engine, s.Resume); s.Resume != "" && err != nil {
			return nil, err
		}
		r := CodexRun{Command: rt.Codex.Command, Model: pick(s.Model, rt.Codex.Model), Petition: s.Petition,
			Resume: s.Resume, Extra: rt.Codex.Args, Network: s.Network}
		if len(s.ResultSchema) > 0 {
			r.SchemaFile, r.LastMessageFile = s.SchemaFile, s.LastMessageFile
		}
		argv = CodexArgs(r)
	case config.EngineCommand:
		if len(rt.Command.Argv) == 0 {
			return nil, errors.New("engine command: runtime.command.argv is empty")
		}
		argv = CommandArgs(rt.Command.Argv, map[string]string{
			"{prompt_file}": s.PromptFile,
			"{workdir}":     s.Workdir,
			"{task_id}":     s.TaskID,
			"{result_path}": s.ResultPath,
		})
	default:
		return nil, fmt.Errorf("unknown engine %q", s.Engine)
	}
	if argv[0] == "" {
		return nil, fmt.Errorf("engine %s: empty command", s.Engine)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("engine %s: %q: %w", s.Engine, argv[0], ErrMissing)
	}
	inv.Path = path
	inv.Args = argv
	return inv, nil
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ClaudeRun are the parts of a claude task invocation.
type ClaudeRun struct {
	Command, Model string
	Resume         string   // --resume (an earlier session), else
	SessionID      string   // --session-id (the soldier's choice for a new one)
	Schema         []byte   // --json-schema
	MaxBudgetUSD   *float64 // --max-budget-usd
	Extra          []string
	// Petition runs the classifier with no tools and no session
	// persistence, in the default permission mode (SPEC §10.9): none of
	// the parts above but Command and Model.
	Petition bool
}

// ClaudeSettings are Kingdom's own settings for every claude run (SPEC
// §12.3): no setting source but the command line's (the repository's
// .claude/settings.json and settings.local.json, and the kingdom user's
// ~/.claude/settings.json, whose "env" would beat the environment Kingdom
// sets and whose "model" would pick the model), and every hook off.
// Measured with claude 2.1.328–2.1.332: either flag alone keeps a
// project's SessionStart hook from running; only the empty source list
// keeps the user's "env" from redirecting ANTHROPIC_BASE_URL, and it also
// keeps every MCP server from starting but one an --mcp-config of
// runtime.claude.args names: the repository's .mcp.json (approved by its
// .claude/settings.json or not) and the kingdom user's ~/.claude.json
// servers (TestRealClaude_NoMCPServerStarts). They come after
// runtime.claude.args, so those cannot undo them.
var ClaudeSettings = []string{"--setting-sources", "", "--settings", `{"disableAllHooks":true}`}

// ClaudeArgs is `<command> -p --output-format stream-json --verbose
// [--model M] [--resume T | --session-id U] [--json-schema S] <extra…>
// <ClaudeSettings…>` (SPEC §9.16, §10.1, §10.5, §12.3); a petition's is
// `<command> -p --output-format stream-json --verbose [--model M] --tools ""
// --no-session-persistence <ClaudeSettings…>`.
func ClaudeArgs(r ClaudeRun) []string {
	a := []string{r.Command, "-p", "--output-format", "stream-json", "--verbose"}
	if r.Model != "" {
		a = append(a, "--model", r.Model)
	}
	if r.Petition {
		a = append(a, "--tools", "", "--no-session-persistence")
		return append(a, ClaudeSettings...)
	}
	switch {
	case r.Resume != "":
		a = append(a, "--resume", r.Resume)
	case r.SessionID != "":
		a = append(a, "--session-id", r.SessionID)
	}
	if len(r.Schema) > 0 {
		a = append(a, "--json-schema", string(r.Schema))
	}
	if r.MaxBudgetUSD != nil {
		a = append(a, "--max-budget-usd", strconv.FormatFloat(*r.MaxBudgetUSD, 'f', -1, 64))
	}
	a = append(a, r.Extra...)
	return append(a, ClaudeSettings...)
}

// CodexRun are the parts of a codex task invocation.
type CodexRun struct {
	Command, Model string
	Resume         string
	// Extra are runtime.codex.args: exec-level flags, before `resume`.
	Extra           []string
	SchemaFile      string // --output-schema
	LastMessageFile string // -o
	// Network is the sandbox's network access (the manifest's
	// engine_network).
	Network bool
	// Petition runs the classifier in the read-only sandbox without
	// keeping a session (SPEC §10.9): none of the parts above but Command
	// and Model.
	Petition bool
}

// CodexArgs is `<command> exec --json --skip-git-repo-check [--model M]
// <extra…> -c sandbox_workspace_write.network_access=<Network>
// [--output-schema F -o F] [resume TOKEN] -`. Every exec-level flag
// precedes `resume`, so a resumed run gets the same sandbox (SPEC §10.10);
// the trailing "-" makes codex read the prompt from stdin. A petition's is
// `<command> exec --json --skip-git-repo-check --sandbox read-only
// --ephemeral [--model M] -`.
func CodexArgs(r CodexRun) []string {
	a := []string{r.Command, "exec", "--json", "--skip-git-repo-check"}
	if r.Petition {
		a = append(a, "--sandbox", "read-only", "--ephemeral")
	}
	if r.Model != "" {
		a = append(a, "--model", r.Model)
	}
	if r.Petition {
		return append(a, "-")
	}
	a = append(a, r.Extra...)
	// The flag that sets the workspace-write sandbox's network access; a
	// later -c of the same key wins (measured with codex 0.169–0.171), so
	// Kingdom's comes after runtime.codex.args.
	a = append(a, "-c", "sandbox_workspace_write.network_access="+strconv.FormatBool(r.Network))
	if r.SchemaFile != "" {
		a = append(a, "--output-schema", r.SchemaFile)
	}
	if r.LastMessageFile != "" {
		a = append(a, "-o", r.LastMessageFile)
	}
	if r.Resume != "" {
		a = append(a, "resume", r.Resume)
	}
	return append(a, "-")
}

// CommandArgs substitutes the placeholders inside each argv element. The
// substitution is a single pass per element: a value that itself contains
// a placeholder is not expanded again, and no shell ever sees the result.
func CommandArgs(argv []string, values map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = substitute(a, values)
	}
	return out
}

func substitute(s string, values map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.IndexByte(s, '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		if v, ok := values[s[:j+1]]; ok {
			b.WriteString(v)
			s = s[j+1:]
			continue
		}
		b.WriteByte('{')
		s = s[1:]
	}
}

// Env builds engine eng's environment from environ (os.Environ form): an
// allowlist, never a copy. Only the names in passthrough and the KINGDOM_*
// variables survive, and of those no credential but eng's own model key
// (config.ModelCredentialEnv; none for the command engine): no GitHub,
// Jira or Slack token, no other secret the redactor knows (the DSN, the
// dashboard's token, runtime.secret_env), whatever passthrough names (SPEC
// §9.17, §12.3). Then extra (the run's KINGDOM_* values, a lent read
// token) is applied.
func Env(eng string, environ []string, passthrough []string, extra map[string]string) []string {
	model := config.ModelCredentialEnv(eng)
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, override := extra[name]; override {
			continue
		}
		if !slices.Contains(passthrough, name) && !strings.HasPrefix(name, "KINGDOM_") {
			continue
		}
		if isModelKey := slices.Contains(model, name); !isModelKey && (config.IsServiceCredential(name) || redact.IsSecretName(name)) {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		out = append(out, k+"="+extra[k])
	}
	return out
}
