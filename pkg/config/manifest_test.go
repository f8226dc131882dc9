package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const goodManifest = `name: gen-pr
description: Reviews pull requests.
timeout_seconds: 900
default_repo: acme/api
supported_engines: [claude, codex]
mode: harnessed_dev
subscribes:
  - github.pr.*
  - github.notification.review_requested
schedules:
  - name: nightly
    cron: "0 3 * * 1-5"
    task_type: pr.sweep
    payload:
      limit: 5
      labels: [a, b]
instructions: |
  Be kind.
memory:
  max_kb: 32
`

func TestLoadManifest_Good(t *testing.T) {
	p := writeFile(t, t.TempDir(), "gen-pr.yaml", goodManifest)
	m, err := LoadManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "gen-pr" || m.TimeoutSeconds != 900 || m.MaxConcurrent != 1 || m.Mode != ModeHarnessedDev ||
		m.Engine != "" || m.Memory.MaxKB != 32 || m.File != p || m.Instructions != "Be kind.\n" ||
		!reflect.DeepEqual(m.Subscribes, []string{"github.pr.*", "github.notification.review_requested"}) {
		t.Errorf("got %+v", m)
	}
	if len(m.Schedules) != 1 {
		t.Fatalf("schedules: %+v", m.Schedules)
	}
	s := m.Schedules[0]
	if s.Name != "nightly" || s.Cron != "0 3 * * 1-5" || s.TaskType != "pr.sweep" || s.Repo != "" ||
		!reflect.DeepEqual(s.Payload, map[string]any{"limit": 5, "labels": []any{"a", "b"}}) {
		t.Errorf("schedule: %+v", s)
	}
}

func TestLoadManifest_Errors(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    string
	}{
		{"bad name", "name: pr-general\n", `:1: name: expected a general name matching ^gen-[a-z][a-z0-9-]*$`},
		{"missing name", "description: x\n", `name: expected a general name matching ^gen-[a-z][a-z0-9-]*$ (at most 64 characters), got ""`},
		{"upper-case name", "name: gen-PR\n", `:1: name: expected a general name`},
		{"bad cron", "name: gen-a\nschedules:\n  - name: n\n    cron: \"* * *\"\n    task_type: t\n",
			`:4: schedules[0].cron: expected a 5-field cron expression (minute hour day-of-month month day-of-week), got "* * *"`},
		{"six-field cron", "name: gen-a\nschedules:\n  - name: n\n    cron: \"0 0 3 * * *\"\n    task_type: t\n",
			`:4: schedules[0].cron: expected a 5-field cron expression`},
		{"cron out of range", "name: gen-a\nschedules:\n  - name: n\n    cron: \"61 * * * *\"\n    task_type: t\n",
			`:4: schedules[0].cron: expected a 5-field cron expression`},
		{"cron TZ prefix", "name: gen-a\nschedules:\n  - name: n\n    cron: \"TZ=UTC 0 3 * * *\"\n    task_type: t\n",
			`schedules[0].cron: expected a 5-field cron expression (minute hour day-of-month month day-of-week), got "TZ=UTC 0 3 * * *": time-zone prefixes are not supported`},
		{"cron CRON_TZ prefix", "name: gen-a\nschedules:\n  - name: n\n    cron: \"CRON_TZ=Bad/Zone 0 3 * * *\"\n    task_type: t\n",
			`schedules[0].cron: expected a 5-field cron expression`},
		{"cron descriptor", "name: gen-a\nschedules:\n  - name: n\n    cron: \"@every 1h\"\n    task_type: t\n",
			`schedules[0].cron: expected a 5-field cron expression`},
		{"bad schedule name", "name: gen-a\nschedules:\n  - name: ../x\n    cron: \"* * * * *\"\n    task_type: t\n",
			`:3: schedules[0].name: expected an id matching`},
		{"duplicate schedule name", "name: gen-a\nschedules:\n  - {name: n, cron: \"* * * * *\", task_type: t}\n  - {name: n, cron: \"* * * * *\", task_type: t}\n",
			`:4: schedules[1].name: duplicate schedule name "n" (also schedules[0])`},
		{"missing task type", "name: gen-a\nschedules:\n  - {name: n, cron: \"* * * * *\"}\n",
			`:3: schedules[0].task_type: expected a task type`},
		{"unknown schedule key", "name: gen-a\nschedules:\n  - {name: n, cron: \"* * * * *\", task_type: t, when: now}\n",
			`:3: schedules[0].when: unknown key (known: name, cron, task_type, repo, payload)`},
		{"bad engine", "name: gen-a\nengine: gpt\n", `:2: engine: expected one of claude|codex|command, got "gpt"`},
		{"bad supported engine", "name: gen-a\nsupported_engines: [claude, gemini]\n", `:2: supported_engines[1]: expected one of claude|codex|command, got "gemini"`},
		{"engine not supported", "name: gen-a\nengine: codex\nsupported_engines: [claude]\n", `:2: engine: expected one of supported_engines (claude), got "codex"`},
		{"bad mode", "name: gen-a\nmode: yolo\n", `:2: mode: expected one of automation|harnessed_dev, got "yolo"`},
		{"bad subscription", "name: gen-a\nsubscribes: [\"github pr\"]\n", `:2: subscribes[0]: expected an event type`},
		{"bad default repo", "name: gen-a\ndefault_repo: https://github.com/a/b\n", `:2: default_repo: expected owner/name`},
		{"bad timeout", "name: gen-a\ntimeout_seconds: 0\n", `:2: timeout_seconds: expected an integer from 1 to 604800, got 0`},
		{"non-string payload key", "name: gen-a\nschedules:\n  - name: n\n    cron: \"* * * * *\"\n    task_type: t\n    payload:\n      nested: {1: x}\n",
			`:6: schedules[0].payload: expected a mapping with string keys`},
		{"unknown key", "name: gen-a\ntimeout: 5\n", `:2: timeout: unknown key (known: name, description, timeout_seconds,`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "gen-a.yaml", tc.content)
			_, err := LoadManifest(p)
			assertErr(t, err, p, tc.want)
		})
	}
}

func TestLoadManifest_MissingFileNamesIt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config", "generals", "gen-x.yaml")
	_, err := LoadManifest(p)
	assertErr(t, err, p, p+": read: no such file or directory")
}

func TestLoadManifests_SortedSkipsOthers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gen-b.yaml", "name: gen-b\n")
	writeFile(t, dir, "gen-a.yaml", "name: gen-a\n")
	writeFile(t, dir, "README.md", "not yaml\n")
	writeFile(t, dir, "gen-c.yml", "name: [broken\n")
	writeFile(t, dir, ".tmp-general-1-ab.yaml", "name: [broken\n")
	writeFile(t, dir, "templates/default.md", "{{task_id}}\n")
	writeFile(t, dir, "templates/gen-x.yaml", "name: [broken\n")
	ms, err := LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if want := []string{"gen-a", "gen-b"}; !reflect.DeepEqual(names, want) {
		t.Errorf("got %v, want %v", names, want)
	}
}

func TestLoadManifests_MissingDirIsEmpty(t *testing.T) {
	ms, err := LoadManifests(filepath.Join(t.TempDir(), "generals"))
	if err != nil || len(ms) != 0 {
		t.Errorf("got %v, %v; want none", ms, err)
	}
}

func TestLoadManifests_FileNameMustMatchName(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gen-a.yaml", "name: gen-a\n")
	p := writeFile(t, dir, "gen-b.yaml", "# renamed\nname: gen-c\n")
	bad := writeFile(t, dir, "gen-d.yaml", "name: gen-d\nmode: x\n")
	ms, err := LoadManifests(dir)
	if len(ms) != 1 || ms[0].Name != "gen-a" {
		t.Errorf("loaded %v, want gen-a only", ms)
	}
	assertErr(t, err, "", p+`:2: name: expected "gen-c" to match the file name gen-b.yaml`, bad+":2: mode:")
	if n := len(Errors(err)); n != 2 {
		t.Errorf("got %d errors, want 2: %v", n, err)
	}
}

func TestParseCron_NeverPanics(t *testing.T) {
	for _, expr := range []string{"", "TZ=", "CRON_TZ=", "TZ=Nowhere/Zone", "* * * * * *", "*/0 * * * *", "0 0 31 2 *"} {
		if _, err := ParseCron(expr); err == nil && expr != "0 0 31 2 *" {
			t.Errorf("ParseCron(%q) accepted", expr)
		}
	}
	if _, err := ParseCron("*/15 9-17 * * mon-fri"); err != nil {
		t.Errorf("ParseCron: %v", err)
	}
}

func TestLoadAll_CollectsEveryError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, KingFile, "retry:\n  max_attempts: abc\n")
	writeFile(t, dir, SentinelFile, "polling:\n  gihub: {}\n")
	writeFile(t, dir, SystemFile, "runtime:\n  engine: gpt\n")
	writeFile(t, dir, "generals/gen-a.yaml", "name: gen-a\nschedules:\n  - {name: n, cron: \"* *\", task_type: t}\n")
	a, err := LoadAll(dir)
	if a != nil {
		t.Errorf("got a config despite errors")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(dir, KingFile) + ":2: retry.max_attempts: expected an integer from 0 to 100, got \"abc\"",
		filepath.Join(dir, SentinelFile) + ":2: polling.gihub: unknown key (known: github, jira, inbox)",
		filepath.Join(dir, SystemFile) + ":2: runtime.engine: expected one of claude|codex|command, got \"gpt\"",
		filepath.Join(dir, "generals", "gen-a.yaml") + ":3: schedules[0].cron:",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q\ndoes not contain %q", msg, want)
		}
	}
}

func TestLoadAll_CrossFileChecks(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string // fragments; "%s" is replaced by dir
	}{
		{"manifest engine command without argv",
			map[string]string{"generals/gen-a.yaml": "name: gen-a\nengine: command\n"},
			[]string{"generals/gen-a.yaml:2: engine: engine command needs runtime.command.argv in"}},
		{"runtime engine not supported by manifest",
			map[string]string{SystemFile: "runtime:\n  engine: codex\n", "generals/gen-a.yaml": "name: gen-a\nsupported_engines: [claude]\n"},
			[]string{"generals/gen-a.yaml:2: supported_engines: expected to include the engine in use, \"codex\""}},
		{"passthrough of a renamed slack token",
			map[string]string{SystemFile: "runtime:\n  env_passthrough: [PATH, MY_BOT]\n", EnvoyFile: "slack:\n  bot_token_env: MY_BOT\n"},
			[]string{"system.yaml:2: runtime.env_passthrough[1]: expected a variable that is not a Slack token"}},
		// SPEC §12.3: a manifest lends a read-only token, never the write one.
		{"read token is the write token",
			map[string]string{"generals/gen-a.yaml": "name: gen-a\ngithub:\n  read_token_env: GITHUB_TOKEN\n"},
			[]string{"generals/gen-a.yaml:3: github.read_token_env: expected a variable holding a read-only token, not the write token"}},
		{"read token passed to every soldier",
			map[string]string{SystemFile: "runtime:\n  env_passthrough: [PATH, GH_READ]\n", "generals/gen-a.yaml": "name: gen-a\ngithub:\n  read_token_env: GH_READ\n"},
			[]string{"system.yaml:2: runtime.env_passthrough[1]: expected a variable that is not a GitHub token", "gen-a.yaml names it in github.read_token_env"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, dir, name, content)
			}
			_, err := LoadAll(dir)
			if err == nil {
				t.Fatal("got no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadAll_GoodDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "generals/gen-pr.yaml", goodManifest)
	writeFile(t, dir, "generals/gen-cmd.yaml", "name: gen-cmd\nengine: command\n")
	writeFile(t, dir, SystemFile, "runtime:\n  command:\n    argv: [demo-soldier, \"{prompt_file}\", \"{result_path}\"]\n")
	a, err := LoadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Manifests) != 2 || a.Manifest("gen-cmd") == nil || a.Manifest("gen-zz") != nil {
		t.Fatalf("manifests: %+v", a.Manifests)
	}
	if got := a.System.EngineFor(a.Manifest("gen-cmd")); got != EngineCommand {
		t.Errorf("EngineFor(gen-cmd) = %q", got)
	}
	if got := a.System.EngineFor(a.Manifest("gen-pr")); got != EngineClaude {
		t.Errorf("EngineFor(gen-pr) = %q", got)
	}
	if got := a.System.EngineFor(nil); got != EngineClaude {
		t.Errorf("EngineFor(nil) = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, EnvFile)); err == nil {
		t.Error("loading created files")
	}
}

func TestParseCron_DescriptorsAreWallClockAndEveryIsRefusedClearly(t *testing.T) {
	from := time.Date(2026, 11, 27, 9, 17, 0, 0, time.Local)
	for expr, want := range map[string]time.Time{
		"@hourly":  time.Date(2026, 11, 27, 10, 0, 0, 0, time.Local),
		"@daily":   time.Date(2026, 11, 28, 0, 0, 0, 0, time.Local),
		"@Weekly":  time.Date(2026, 11, 29, 0, 0, 0, 0, time.Local),
		"@monthly": time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local),
		"@yearly":  time.Date(2027, 1, 1, 0, 0, 0, 0, time.Local),
	} {
		s, err := ParseCron(expr)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
			continue
		}
		if got := s.Next(from); !got.Equal(want) {
			t.Errorf("%s next after %v = %v, want %v", expr, from, got, want)
		}
	}
	for expr, want := range map[string]string{"@every 5m": "wall-clock", "@often": "unknown descriptor"} {
		if _, err := ParseCron(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCron(%q) = %v, want an error saying %q", expr, err, want)
		}
	}
}

// A manifest's read token is a secret like the others: its value is
// redacted wherever the redactor runs (SPEC §12.3).
func TestSecretEnvNames_IncludeManifestReadTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "generals/gen-a.yaml", "name: gen-a\ngithub:\n  read_token_env: GEN_A_READ_TOKEN\n")
	if names := SecretEnvNames(dir); !slices.Contains(names, "GEN_A_READ_TOKEN") {
		t.Errorf("SecretEnvNames = %v, want GEN_A_READ_TOKEN", names)
	}
}

// SPEC §12.3: a manifest allows output kinds and caps them; by default it
// allows none, runs one of each allowed kind, protects CI and the engines'
// instruction files, and caps a push's patch at 512 KB.
func TestLoadManifest_Outputs(t *testing.T) {
	dir := t.TempDir()
	m, err := LoadManifest(writeFile(t, dir, "gen-a.yaml", "name: gen-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := m.Outputs
	if len(o.Allow) != 0 || o.Allows("github.comment") || o.MaxOf("github.review") != 1 || o.MaxPatchBytes() != 512<<10 ||
		!slices.Equal(o.Protected(), []string{".github/**", ".claude/**", ".codex/**", ".mcp.json", "CLAUDE.md", "AGENTS.md"}) {
		t.Errorf("defaults: %+v protected %v", o, o.Protected())
	}
	m, err = LoadManifest(writeFile(t, dir, "gen-b.yaml", "name: gen-b\noutputs:\n  allow: [github.review, github.push]\n"+
		"  max: {github.review: 2, github.push: 0}\n  protected_paths: []\n  max_patch_kb: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	o = m.Outputs
	if !o.Allows("github.push") || o.Allows("jira.comment") || o.MaxOf("github.review") != 2 || o.MaxOf("github.push") != 0 ||
		o.MaxOf("github.comment") != 1 || len(o.Protected()) != 0 || o.MaxPatchBytes() != 8<<10 {
		t.Errorf("set: %+v", o)
	}
	for _, c := range []struct{ body, want string }{
		{"outputs:\n  allow: [github.merge]\n", `:3: outputs.allow[0]: expected one of github.review|github.comment|github.push|github.pull_request|jira.comment, got "github.merge"`},
		{"outputs:\n  max: {slack.post: 1}\n", `outputs.max.slack.post: expected a key among`},
		{"outputs:\n  max: {github.comment: -1}\n", `outputs.max.github.comment: expected 0..100, got -1`},
		{"outputs:\n  protected_paths: [\"/etc/x\"]\n", `outputs.protected_paths[0]: expected a repository-relative glob`},
		{"outputs:\n  max_patch_kb: 0\n", `outputs.max_patch_kb`},
	} {
		_, err := LoadManifest(writeFile(t, dir, "gen-c.yaml", "name: gen-c\n"+c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.body, err, c.want)
		}
	}
}

// The shipped gen-pr manifest lets its agent review, comment, push a fix
// branch and open a pull request from it, and nothing else.
func TestShippedGenPR_AllowsItsOutputs(t *testing.T) {
	for _, p := range []string{"../../config/generals/gen-pr.yaml", "../../generals/gen-pr/manifest.yaml"} {
		m, err := LoadManifest(p)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"github.review", "github.comment", "github.push", "github.pull_request"}
		if !slices.Equal(m.Outputs.Allow, want) {
			t.Errorf("%s: outputs.allow = %v, want %v", p, m.Outputs.Allow, want)
		}
		if strings.Contains(m.Instructions, "gh") && strings.Contains(m.Instructions, "GH_TOKEN") {
			t.Errorf("%s: instructions still send the agent to gh with a token: %q", p, m.Instructions)
		}
	}
}

// Manifest returns the manifest named name, or nil.
func (a *All) Manifest(name string) *Manifest {
	for _, m := range a.Manifests {
		if m.Name == name {
			return m
		}
	}
	return nil
}
