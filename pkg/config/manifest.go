package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/kingdom-dev/kingdom/pkg/ids"
)

// Modes of a general.
const (
	ModeAutomation   = "automation"
	ModeHarnessedDev = "harnessed_dev"
)

// Manifest is a general's config/generals/<name>.yaml.
type Manifest struct {
	Name             string         `yaml:"name"` // ^gen-[a-z][a-z0-9-]*$; session and state dir name
	Description      string         `yaml:"description"`
	TimeoutSeconds   int            `yaml:"timeout_seconds" check:"min=1,max=604800"`
	MaxConcurrent    int            `yaml:"max_concurrent" check:"min=1,max=1000"`
	DefaultRepo      string         `yaml:"default_repo"` // owner/name, used when an event has none
	Engine           string         `yaml:"engine" check:"opt,oneof=claude|codex|command"`
	SupportedEngines []string       `yaml:"supported_engines" check:"oneof=claude|codex|command"`
	Mode             string         `yaml:"mode" check:"oneof=automation|harnessed_dev"`
	Subscribes       []string       `yaml:"subscribes"` // event types; a "*" segment is a wildcard
	Schedules        []Schedule     `yaml:"schedules"`
	Instructions     string         `yaml:"instructions"` // added to the workspace's CLAUDE.md/AGENTS.md
	Memory           ManifestMemory `yaml:"memory"`
	// BudgetUSD overrides king.yaml budget.task_usd for this general's tasks.
	BudgetUSD *float64 `yaml:"budget_usd" check:"min=0,max=1000000"`
	// TrackConversation keeps the conversation of a Slack-originated task
	// that succeeded: a follow-up in its thread from the same user resumes
	// the session (SPEC §9.10). gen-herald sets it.
	TrackConversation bool `yaml:"track_conversation"`
	// GitHub is what the agent may hold of GitHub (SPEC §12.3).
	GitHub ManifestGitHub `yaml:"github"`
	// Outputs are the side effects the agent may ask Kingdom to carry out
	// (SPEC §12.3).
	Outputs ManifestOutputs `yaml:"outputs"`
	// EngineNetwork lets a codex soldier's sandbox reach the network
	// (sandbox_workspace_write.network_access); off by default.
	EngineNetwork bool `yaml:"engine_network"`

	// File is the path the manifest was loaded from; empty when built in code.
	File string `yaml:"-"`

	src *source // lines of the keys in File, for cross-file errors
}

// Schedule is a cron-driven task of a general.
type Schedule struct {
	Name     string         `yaml:"name"`      // valid id, unique within the manifest
	Cron     string         `yaml:"cron"`      // 5 fields, host local time
	TaskType string         `yaml:"task_type"` // the task's type
	Repo     string         `yaml:"repo"`      // owner/name; empty: the manifest's default_repo
	Payload  map[string]any `yaml:"payload"`
}

// ManifestGitHub: the agent never holds the write token; a read-only one
// may be lent to it.
type ManifestGitHub struct {
	// ReadTokenEnv names a variable (kingdom.env or the environment)
	// holding a read-only GitHub token, passed to the soldier as GH_TOKEN;
	// empty: the soldier has none. Never GH_TOKEN or GITHUB_TOKEN, the
	// write token.
	ReadTokenEnv string `yaml:"read_token_env"`
}

// ManifestOutputs allow the kinds of outputs an agent may ask for and cap
// them (SPEC §12.3). An output of a kind not allowed, past its kind's max,
// or pushing a protected path or a patch over max_patch_kb is refused
// (an outcome with its reason, not an error).
type ManifestOutputs struct {
	// Allow lists the kinds (doc.OutputKinds); empty: none.
	Allow []string `yaml:"allow"`
	// Max caps each kind per attempt; a kind absent here may run once.
	Max map[string]int `yaml:"max"`
	// ProtectedPaths are globs (** crosses directories) a push may not
	// touch; nil: DefaultProtectedPaths.
	ProtectedPaths []string `yaml:"protected_paths"`
	// MaxPatchKB caps the size of a push's diff.
	MaxPatchKB int `yaml:"max_patch_kb" check:"min=1,max=102400"`
}

// OutputKinds are the kinds outputs.allow and outputs.max may name
// (doc.OutputKinds; config imports no document package).
var OutputKinds = []string{"github.review", "github.comment", "github.push", "github.pull_request", "jira.comment"}

// DefaultProtectedPaths are what a push may never touch unless a manifest
// says otherwise: CI and the engines' instruction and settings files.
var DefaultProtectedPaths = []string{".github/**", ".claude/**", ".codex/**", ".mcp.json", "CLAUDE.md", "AGENTS.md"}

// DefaultOutputMax is how many outputs of one kind an attempt may run
// when outputs.max does not name the kind.
const DefaultOutputMax = 1

// MaxOf is how many outputs of kind one attempt may run.
func (o ManifestOutputs) MaxOf(kind string) int {
	if n, ok := o.Max[kind]; ok {
		return n
	}
	return DefaultOutputMax
}

// Allows reports whether kind is in outputs.allow.
func (o ManifestOutputs) Allows(kind string) bool { return slices.Contains(o.Allow, kind) }

// Protected are the globs a push may not touch: protected_paths, or
// DefaultProtectedPaths when the key is absent (an explicit [] protects
// nothing).
func (o ManifestOutputs) Protected() []string {
	if o.ProtectedPaths == nil {
		return DefaultProtectedPaths
	}
	return o.ProtectedPaths
}

// MaxPatchBytes caps a push's diff.
func (o ManifestOutputs) MaxPatchBytes() int64 { return int64(o.MaxPatchKB) << 10 }

// ManifestMemory bounds the general's learned memory.
type ManifestMemory struct {
	MaxKB int `yaml:"max_kb" check:"min=1,max=10240"`
}

// DefaultManifest returns a manifest's defaults (without a name).
func DefaultManifest() *Manifest {
	return &Manifest{
		TimeoutSeconds:   1800,
		MaxConcurrent:    1,
		Mode:             ModeAutomation,
		SupportedEngines: []string{},
		Subscribes:       []string{},
		Schedules:        []Schedule{},
		Memory:           ManifestMemory{MaxKB: 64},
		Outputs:          ManifestOutputs{Allow: []string{}, Max: map[string]int{}, MaxPatchKB: 512},
	}
}

// LoadManifest loads one manifest. Unlike the role files it must exist.
func LoadManifest(path string) (*Manifest, error) {
	m, _, err := loadManifest(path)
	return m, err
}

func loadManifest(path string) (*Manifest, *source, error) {
	m := DefaultManifest()
	src, err := loadFile(path, m, false)
	if err != nil {
		return nil, nil, err
	}
	// Keep the key lines for cross-file errors, not the parsed tree.
	m.File, m.src = path, &source{file: path, lines: src.lines}
	if err := m.Validate(); err != nil {
		return nil, nil, src.locate(err)
	}
	return m, src, nil
}

// LoadManifests loads every <name>.yaml directly in dir (normally
// config/generals), sorted by name. Other files, dot-files and
// subdirectories (templates/) are ignored; a missing dir holds no manifests.
// Each file must be named after its manifest's name. It returns the
// manifests that loaded together with an error joining every failure.
func LoadManifests(dir string) ([]*Manifest, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{File: dir, Msg: "read directory", Err: unwrapPath(err)}
	}
	var out []*Manifest
	var errs []*Error
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || filepath.Ext(name) != ".yaml" {
			continue
		}
		path := filepath.Join(dir, name)
		m, src, err := loadManifest(path)
		if err != nil {
			errs = append(errs, asErrors(err, path)...)
			continue
		}
		if want := m.Name + ".yaml"; name != want {
			errs = append(errs, &Error{File: path, Line: src.line("name"), Key: "name",
				Msg: fmt.Sprintf("expected %q to match the file name %s", m.Name, name)})
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Manifest) int { return strings.Compare(a.Name, b.Name) })
	return out, join(errs)
}

// asErrors flattens err into *Error values, naming file for foreign ones.
func asErrors(err error, file string) []*Error {
	errs := Errors(err)
	if len(errs) == 0 {
		errs = []*Error{{File: file, Err: err}}
	}
	return errs
}

// Validate checks every key of m.
func (m *Manifest) Validate() error {
	var p problems
	if !ids.ValidGeneral(m.Name) {
		p.add("name", "expected a general name matching ^gen-[a-z][a-z0-9-]*$ (at most 64 characters), got %q", m.Name)
	}
	checkRules(reflect.ValueOf(m), "", &p)
	if m.DefaultRepo != "" && !repoRE.MatchString(m.DefaultRepo) {
		p.add("default_repo", "expected owner/name, got %q", m.DefaultRepo)
	}
	if m.Engine != "" && len(m.SupportedEngines) > 0 && !slices.Contains(m.SupportedEngines, m.Engine) {
		p.add("engine", "expected one of supported_engines (%s), got %q", strings.Join(m.SupportedEngines, "|"), m.Engine)
	}
	if n := m.GitHub.ReadTokenEnv; n != "" {
		switch {
		case !envNameRE.MatchString(n):
			p.add("github.read_token_env", "expected an environment variable name, got %q", n)
		case IsServiceCredential(n):
			p.add("github.read_token_env", "expected a variable holding a read-only token, not the write token or a Jira or Slack one (%s), got %q",
				strings.Join(GitHubTokenEnv, ", "), n)
		}
	}
	m.validateOutputs(&p)
	for i, s := range m.Subscribes {
		if !subscribeRE.MatchString(s) {
			p.add(fmt.Sprintf("subscribes[%d]", i), "expected an event type such as github.pr.review_requested or github.pr.*, got %q", s)
		}
	}
	seen := map[string]int{}
	for i, s := range m.Schedules {
		key := fmt.Sprintf("schedules[%d]", i)
		switch first, dup := seen[s.Name]; {
		case !ids.Valid(s.Name):
			p.add(key+".name", "expected an id matching ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$ without '..', got %q", s.Name)
		case dup:
			p.add(key+".name", "duplicate schedule name %q (also schedules[%d])", s.Name, first)
		default:
			seen[s.Name] = i
		}
		if _, err := ParseCron(s.Cron); err != nil {
			p.add(key+".cron", "expected a 5-field cron expression (minute hour day-of-month month day-of-week), got %q: %v", s.Cron, err)
		}
		if !eventTypeRE.MatchString(s.TaskType) {
			p.add(key+".task_type", "expected a task type such as briefing.daily, got %q", s.TaskType)
		}
		if s.Repo != "" && !repoRE.MatchString(s.Repo) {
			p.add(key+".repo", "expected owner/name, got %q", s.Repo)
		}
		if _, err := json.Marshal(s.Payload); err != nil {
			p.add(key+".payload", "expected a mapping with string keys (it becomes JSON): %v", err)
		}
	}
	return p.err()
}

func (m *Manifest) validateOutputs(p *problems) {
	o := &m.Outputs
	kinds := strings.Join(OutputKinds, "|")
	for i, k := range o.Allow {
		if !slices.Contains(OutputKinds, k) {
			p.add(fmt.Sprintf("outputs.allow[%d]", i), "expected one of %s, got %q", kinds, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.Max)) {
		switch n := o.Max[k]; {
		case !slices.Contains(OutputKinds, k):
			p.add("outputs.max."+k, "expected a key among %s, got %q", kinds, k)
		case n < 0 || n > 100:
			p.add("outputs.max."+k, "expected 0..100, got %d", n)
		}
	}
	for i, g := range o.ProtectedPaths {
		if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil || strings.TrimSpace(g) == "" || strings.HasPrefix(g, "/") {
			p.add(fmt.Sprintf("outputs.protected_paths[%d]", i), "expected a repository-relative glob such as .github/**, got %q", g)
		}
	}
}

// Timeout is the soldier's time limit.
func (m *Manifest) Timeout() time.Duration { return seconds(m.TimeoutSeconds) }

// MemoryMaxBytes caps the general's learned-patterns file.
func (m *Manifest) MemoryMaxBytes() int64 { return int64(m.Memory.MaxKB) << 10 }

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// cronDescriptors are the @-forms a schedule may use, as their 5-field
// equivalents (wall-clock times, like every schedule).
var cronDescriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// ParseCron parses a 5-field cron expression (host local time). Time-zone
// prefixes are refused, and a panic inside the parser becomes an error.
func ParseCron(expr string) (sched cron.Schedule, err error) {
	f := strings.Fields(expr)
	if len(f) > 0 && (strings.HasPrefix(f[0], "TZ=") || strings.HasPrefix(f[0], "CRON_TZ=")) {
		return nil, errors.New("time-zone prefixes are not supported; schedules use host local time")
	}
	if len(f) > 0 && strings.HasPrefix(f[0], "@") {
		if strings.HasPrefix(f[0], "@every") {
			return nil, errors.New("@every is not supported: schedules fire at wall-clock times; use a 5-field expression such as \"*/15 * * * *\"")
		}
		five, ok := cronDescriptors[strings.ToLower(strings.TrimSpace(expr))]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q: use @hourly, @daily, @midnight, @weekly, @monthly, @yearly or a 5-field expression", expr)
		}
		expr = five
	}
	// robfig/cron panics on some malformed TZ= specs; never let a manifest
	// take a role down.
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("invalid cron expression: %v", r)
		}
	}()
	return cronParser.Parse(expr)
}
