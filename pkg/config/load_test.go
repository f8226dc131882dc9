package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeFile writes content to dir/name (creating parents) and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loaders adapts every role loader to one shape.
var loaders = map[string]func(string) (any, error){
	SystemFile:      func(p string) (any, error) { return LoadSystem(p) },
	SentinelFile:    func(p string) (any, error) { return LoadSentinel(p) },
	KingFile:        func(p string) (any, error) { return LoadKing(p) },
	EnvoyFile:       func(p string) (any, error) { return LoadEnvoy(p) },
	ChamberlainFile: func(p string) (any, error) { return LoadChamberlain(p) },
}

var defaults = map[string]func() any{
	SystemFile:      func() any { return DefaultSystem() },
	SentinelFile:    func() any { return DefaultSentinel() },
	KingFile:        func() any { return DefaultKing() },
	EnvoyFile:       func() any { return DefaultEnvoy() },
	ChamberlainFile: func() any { return DefaultChamberlain() },
}

func TestLoad_MissingRoleFileMeansDefaults(t *testing.T) {
	dir := t.TempDir()
	for name, load := range loaders {
		t.Run(name, func(t *testing.T) {
			got, err := load(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("load missing %s: %v", name, err)
			}
			if want := defaults[name](); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoad_EmptyRoleFileMeansDefaults(t *testing.T) {
	dir := t.TempDir()
	for name, load := range loaders {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, dir, name, "# nothing here\n")
			got, err := load(p)
			if err != nil {
				t.Fatalf("load empty %s: %v", name, err)
			}
			if want := defaults[name](); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDefaults_AreValid(t *testing.T) {
	for name, def := range defaults {
		if err := def().(interface{ Validate() error }).Validate(); err != nil {
			t.Errorf("%s defaults: %v", name, err)
		}
	}
}

func TestDefaults_MatchSpec(t *testing.T) {
	s := DefaultSystem()
	if s.Runtime.Engine != "claude" || s.Runtime.Claude.Command != "claude" || s.Runtime.Codex.Command != "codex" ||
		!reflect.DeepEqual(s.Runtime.Claude.Args, []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash(git:*)"}) ||
		!reflect.DeepEqual(s.Runtime.Codex.Args, []string{"--sandbox", "workspace-write"}) ||
		s.Git.CloneURL != "https://github.com/{repo}.git" || s.WatchdogInterval() != time.Minute ||
		s.Watchdog.CrashLoop.MaxRestarts != 5 || s.CrashLoopWindow() != 10*time.Minute || s.StopGrace() != 10*time.Second ||
		s.Log.Level != "info" ||
		!reflect.DeepEqual(s.Runtime.EnvPassthrough, []string{"PATH", "HOME", "LANG", "TZ", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"}) {
		t.Errorf("system defaults: %+v", s)
	}
	k := DefaultKing()
	if k.Retry != (KingRetry{2, 60, 3600}) || k.Concurrency.MaxSoldiers != 3 ||
		!reflect.DeepEqual(k.Petition, Petition{Enabled: true, Models: map[string]string{"claude": "haiku", "codex": ""}, TimeoutSeconds: 15}) ||
		k.Petition.ModelFor("codex") != "" || k.Petition.ModelFor("claude") != "haiku" || k.CatchUpWindow() != 24*time.Hour ||
		k.EventsInterval() != 10*time.Second || k.ResultsInterval() != 10*time.Second {
		t.Errorf("king defaults: %+v", k)
	}
	e := DefaultEnvoy()
	if e.Slack.BotTokenEnv != "SLACK_BOT_TOKEN" || e.Slack.AppTokenEnv != "SLACK_APP_TOKEN" ||
		e.Slack.APIURL != "https://slack.com/api/" || e.Slack.AllowAll || len(e.Slack.AllowedUsers) != 0 ||
		e.OutboundInterval() != 5*time.Second || e.ConversationTTL() != time.Hour || e.Retry.MaxAttempts != 3 {
		t.Errorf("envoy defaults: %+v", e)
	}
	c := DefaultChamberlain()
	if c.MonitoringInterval() != 30*time.Second || c.HeartbeatThreshold() != 2*time.Minute ||
		c.Thresholds != (Thresholds{60, 80, 90, 60, 80, 90, 85, 2}) || c.Anomaly != (Anomaly{3, 5, 30}) ||
		c.AutoRecovery != (AutoRecovery{true, false}) ||
		c.Retention != (Retention{100, 7, 7, 7, 3, 7, 30, 7, 7, 7, 7, 7, 14, 7}) || c.Retention.LogMaxBytes() != 100<<20 ||
		c.EventsRotation.Hour != 0 || c.Report.Hour != 18 || c.Cleanup.Hour != 3 ||
		c.TokenLimits != (TokenLimits{true, 300, 70, 90, 60, "~/.claude/stats-cache.json"}) ||
		c.Pricing != (Pricing{15, 75, 1.5}) || c.AlertRepeat() != 30*time.Minute || c.OrphanGrace() != 10*time.Minute {
		t.Errorf("chamberlain defaults: %+v", c)
	}
	sn := DefaultSentinel()
	if sn.Polling.GitHub.Enabled() || sn.Polling.Jira.Enabled() || !sn.Polling.Inbox.Enabled() ||
		sn.Polling.Inbox.Interval() != 10*time.Second {
		t.Errorf("sentinel defaults: %+v", sn)
	}
	if g := DefaultGitHubWatcher(); g.Interval() != time.Minute || g.APIURL != "https://api.github.com" || g.Timeout() != 30*time.Second {
		t.Errorf("github defaults: %+v", g)
	}
	if j := DefaultJiraWatcher(); j.Interval() != 5*time.Minute || j.URL != "" || j.Timeout() != 30*time.Second {
		t.Errorf("jira defaults: %+v", j)
	}
	m := DefaultManifest()
	if m.Timeout() != 30*time.Minute || m.MaxConcurrent != 1 || m.Mode != ModeAutomation || m.MemoryMaxBytes() != 64<<10 {
		t.Errorf("manifest defaults: %+v", m)
	}
}

func TestLoad_ShippedFilesEqualDefaults(t *testing.T) {
	for name, load := range loaders {
		t.Run(name, func(t *testing.T) {
			got, err := load(filepath.Join("..", "..", "config", name))
			if err != nil {
				t.Fatalf("load shipped %s: %v", name, err)
			}
			if want := defaults[name](); !reflect.DeepEqual(got, want) {
				t.Errorf("shipped %s differs from defaults:\ngot  %+v\nwant %+v", name, got, want)
			}
		})
	}
}

func TestLoadAll_ShippedDirLoads(t *testing.T) {
	a, err := LoadAll(filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	if !reflect.DeepEqual(a.King, DefaultKing()) || !reflect.DeepEqual(a.Sentinel, DefaultSentinel()) {
		t.Errorf("LoadAll: got %+v", a)
	}
}

func TestLoad_OverridesKeepOtherDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), KingFile, "retry:\n  max_attempts: 5\n")
	k, err := LoadKing(p)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultKing()
	want.Retry.MaxAttempts = 5
	if !reflect.DeepEqual(k, want) {
		t.Errorf("got %+v, want %+v", k, want)
	}
}

// errCase is one bad file and the fragments its error must contain.
type errCase struct {
	name    string
	file    string // role file name
	content string
	want    []string // fragments after "<path>"; the path itself is always checked
}

func TestLoad_ErrorsNameFileLineAndKey(t *testing.T) {
	cases := []errCase{
		{"bad type", KingFile, "retry:\n  max_attempts: abc\n",
			[]string{":2: retry.max_attempts: expected an integer from 0 to 100, got \"abc\""}},
		{"bad type at top", KingFile, "retry: 3\n",
			[]string{":1: retry: expected a mapping, got \"3\""}},
		{"list for a scalar", SystemFile, "runtime:\n  engine: [claude]\n",
			[]string{":2: runtime.engine: expected one of claude|codex|command, got a list"}},
		{"bool", EnvoyFile, "slack:\n  allow_all: yes please\n",
			[]string{":2: slack.allow_all: expected true or false, got \"yes please\""}},
		{"float", ChamberlainFile, "pricing:\n  input_per_mtok: cheap\n",
			[]string{":2: pricing.input_per_mtok: expected a number from 0 to 10000, got \"cheap\""}},
		{"list element", SystemFile, "runtime:\n  env_passthrough:\n    - PATH\n    - {a: b}\n",
			[]string{":4: runtime.env_passthrough[1]: expected a string, got a mapping"}},
		{"unknown top-level key", KingFile, "retyr:\n  max_attempts: 1\n",
			[]string{":1: retyr: unknown key (known: slack, retry, concurrency, petition, schedules, intervals, budget, breaker)"}},
		{"unknown nested key", ChamberlainFile, "thresholds:\n  cpu_yelow: 50\n",
			[]string{":2: thresholds.cpu_yelow: unknown key (known: cpu_yellow,"}},
		{"unknown watcher", SentinelFile, "polling:\n  inbox: {}\n  gihub:\n    interval_seconds: 5\n",
			[]string{":3: polling.gihub: unknown key (known: github, jira, inbox)"}},
		{"unknown key in watcher", SentinelFile, "polling:\n  github:\n    scope:\n      repo: [a/b]\n",
			[]string{":4: polling.github.scope.repo: unknown key (known: repos, filter_reasons)"}},
		{"duplicate key", KingFile, "retry:\n  max_attempts: 1\n  max_attempts: 2\n",
			[]string{":3: retry.max_attempts: duplicate key (first at line 2)"}},
		{"bad enum", SystemFile, "runtime:\n  engine: gpt\n",
			[]string{":2: runtime.engine: expected one of claude|codex|command, got \"gpt\""}},
		{"negative", KingFile, "retry:\n  max_attempts: -1\n",
			[]string{":2: retry.max_attempts: expected an integer from 0 to 100, got -1"}},
		{"zero positive", KingFile, "\nconcurrency:\n  max_soldiers: 0\n",
			[]string{":3: concurrency.max_soldiers: expected an integer from 1 to 1000, got 0"}},
		{"hour out of range", ChamberlainFile, "report:\n  hour: 24\n",
			[]string{":2: report.hour: expected an integer from 0 to 23, got 24"}},
		{"thresholds out of order", ChamberlainFile, "thresholds:\n  cpu_yellow: 85\n",
			[]string{":1: thresholds.cpu_orange: expected at least cpu_yellow (85), got 80"}},
		{"command engine needs argv", SystemFile, "runtime:\n  engine: command\n",
			[]string{"runtime.command.argv: expected a non-empty list when runtime.engine is command"}},
		{"unknown placeholder", SystemFile, "runtime:\n  command:\n    argv: [x, \"{prompt}\"]\n",
			[]string{":3: runtime.command.argv[1]: unknown placeholder {prompt}"}},
		{"secret passthrough", SystemFile, "runtime:\n  env_passthrough: [PATH, SLACK_BOT_TOKEN]\n",
			[]string{"system.yaml:2: runtime.env_passthrough[1]: expected a variable that is not a GitHub, Jira or Slack credential"}},
		// SPEC §12.3: the write token never reaches the agent, named by
		// file, line and key.
		{"github token passthrough", SystemFile, "runtime:\n  env_passthrough:\n    - PATH\n    - GH_TOKEN\n    - GITHUB_TOKEN\n    - JIRA_API_TOKEN\n",
			[]string{"system.yaml:4: runtime.env_passthrough[1]: expected a variable that is not a GitHub, Jira or Slack credential",
				"system.yaml:5: runtime.env_passthrough[2]: expected a variable that is not a GitHub, Jira or Slack credential",
				"system.yaml:6: runtime.env_passthrough[3]: expected a variable that is not a GitHub, Jira or Slack credential"}},
		{"secret_env passthrough", SystemFile, "runtime:\n  secret_env: [DEPLOY_KEY]\n  env_passthrough: [PATH, DEPLOY_KEY, KINGDOM_PG_DSN]\n",
			[]string{"system.yaml:3: runtime.env_passthrough[1]: expected a variable that is not a secret",
				"runtime.env_passthrough[2]: expected a variable that is not a secret"}},
		{"clone url", SystemFile, "git:\n  clone_url: https://example.com/x.git\n",
			[]string{":2: git.clone_url: expected a URL containing {repo}"}},
		{"slack api url", EnvoyFile, "slack:\n  api_url: https://slack.com/api\n",
			[]string{":2: slack.api_url: expected an http(s) URL ending in /"}},
		{"jira without url", SentinelFile, "polling:\n  jira:\n    interval_seconds: 60\n",
			[]string{":2: polling.jira.url: expected the Jira site's http(s) URL"}},
		{"scope repo", SentinelFile, "polling:\n  github:\n    scope:\n      repos: [just-a-name]\n",
			[]string{":4: polling.github.scope.repos[0]: expected owner/name, got \"just-a-name\""}},
		{"syntax error", KingFile, "retry:\n  max_attempts: 1\n bad: [\n",
			[]string{":2: did not find expected key"}},
		{"top level list", KingFile, "- a\n- b\n",
			[]string{": expected a mapping, got a list"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "config/"+tc.file, tc.content)
			_, err := loaders[tc.file](p)
			assertErr(t, err, p, tc.want...)
		})
	}
}

// assertErr checks that err names path and contains every fragment, and
// that it is made of *Error values.
func assertErr(t *testing.T, err error, path string, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one naming %s", path)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, path) {
		t.Errorf("error %q does not start with the file %s", msg, path)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q\ndoes not contain %q", msg, f)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("error %T is not a *config.Error", err)
	}
}

func TestLoad_SeveralErrorsAreJoined(t *testing.T) {
	p := writeFile(t, t.TempDir(), KingFile, "retry:\n  max_attempts: x\n  backof_seconds: 1\nconcurrency:\n  max_soldiers: []\n")
	_, err := LoadKing(p)
	errs := Errors(err)
	if len(errs) != 3 {
		t.Fatalf("got %d errors, want 3: %v", len(errs), err)
	}
	for i, want := range []struct {
		line int
		key  string
	}{{2, "retry.max_attempts"}, {3, "retry.backof_seconds"}, {5, "concurrency.max_soldiers"}} {
		if errs[i].Key != want.key || errs[i].File != p || errs[i].Line != want.line {
			t.Errorf("error %d: got %s:%d %s, want %s:%d %s", i, errs[i].File, errs[i].Line, errs[i].Key, p, want.line, want.key)
		}
	}
}

func TestLoad_UnreadableFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, KingFile)
	if err := os.Mkdir(p, 0o700); err != nil { // a directory cannot be read as a file
		t.Fatal(err)
	}
	_, err := LoadKing(p)
	assertErr(t, err, p, "read")
}

func TestSentinel_WatcherPresenceEnables(t *testing.T) {
	cases := []struct {
		name                string
		content             string
		github, jira, inbox bool
	}{
		{"no file key", "", false, false, true},
		{"empty polling", "polling:\n", false, false, false},
		{"empty mapping", "polling: {}\n", false, false, false},
		{"github only, empty value", "polling:\n  github:\n", true, false, false},
		{"all", "polling:\n  github: {}\n  jira:\n    url: https://x.atlassian.net\n  inbox:\n", true, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), SentinelFile, tc.content)
			s, err := LoadSentinel(p)
			if err != nil {
				t.Fatal(err)
			}
			got := [3]bool{s.Polling.GitHub.Enabled(), s.Polling.Jira.Enabled(), s.Polling.Inbox.Enabled()}
			if want := [3]bool{tc.github, tc.jira, tc.inbox}; got != want {
				t.Errorf("enabled (github, jira, inbox) = %v, want %v", got, want)
			}
		})
	}
}

func TestSentinel_PresentWatcherStartsFromDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), SentinelFile, "polling:\n  github:\n    interval_seconds: 120\n    scope:\n      repos: [o/r]\n")
	s, err := LoadSentinel(p)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultGitHubWatcher()
	want.IntervalSeconds = 120
	want.Scope.Repos = []string{"o/r"}
	if !reflect.DeepEqual(s.Polling.GitHub, want) {
		t.Errorf("got %+v, want %+v", s.Polling.GitHub, want)
	}
	if got := s.Polling.Names(); !reflect.DeepEqual(got, []string{"github"}) {
		t.Errorf("Names() = %v", got)
	}
}

func TestDefaultChannel_EnvOverridesYAML(t *testing.T) {
	k, e := DefaultKing(), DefaultEnvoy()
	k.Slack.DefaultChannel, e.Slack.DefaultChannel = "C-yaml", "C-yaml"
	t.Setenv(EnvDefaultChannel, "")
	if k.DefaultChannel() != "C-yaml" || e.DefaultChannel() != "C-yaml" {
		t.Errorf("without env: got %q, %q", k.DefaultChannel(), e.DefaultChannel())
	}
	t.Setenv(EnvDefaultChannel, "C-env")
	if k.DefaultChannel() != "C-env" || e.DefaultChannel() != "C-env" {
		t.Errorf("with env: got %q, %q", k.DefaultChannel(), e.DefaultChannel())
	}
}

func TestEnvoy_Allowed(t *testing.T) {
	e := DefaultEnvoy()
	e.Slack.AllowedUsers = []string{"U1"}
	if !e.Allowed("U1") || e.Allowed("U2") || e.Allowed("") {
		t.Error("allowlist not applied")
	}
	e.Slack.AllowAll = true
	if !e.Allowed("U2") {
		t.Error("allow_all not applied")
	}
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/k")
	for in, want := range map[string]string{
		"~/.claude/x.json": "/home/k/.claude/x.json",
		"~":                "/home/k",
		"/abs/~/x":         "/abs/~/x",
		"~other/x":         "~other/x",
		"rel":              "rel",
	} {
		if got := ExpandHome(in); got != want {
			t.Errorf("ExpandHome(%q) = %q, want %q", in, got, want)
		}
	}
	if got := DefaultChamberlain().StatsPath(); got != "/home/k/.claude/stats-cache.json" {
		t.Errorf("StatsPath() = %q", got)
	}
}

func TestLoad_AliasBombsFinish(t *testing.T) {
	// Each level doubles (merge keys) or multiplies by ten (lists) the
	// values an expansion visits.
	var merge, list strings.Builder
	merge.WriteString("schedules:\n  - &m0 {name: n, cron: \"* * * * *\", task_type: t}\n")
	list.WriteString("name: gen-a\nschedules:\n  - name: n\n    cron: \"* * * * *\"\n    task_type: t\n    payload:\n      a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&merge, "  - &m%d {<<: [*m%d, *m%d]}\n", i, i-1, i-1)
	}
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&list, "      a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for name, content := range map[string]string{"merge": "name: gen-a\n" + merge.String(), "list": list.String()} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "gen-a.yaml", content)
			done := make(chan error, 1)
			go func() { _, err := LoadManifest(p); done <- err }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("accepted an alias bomb")
				}
				t.Log(err)
			case <-time.After(20 * time.Second):
				t.Fatal("alias bomb still being loaded after 20s")
			}
		})
	}
}
