package general

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// TestWorkspace_AgentGitConfigNeverRunsInTheGeneral: an agent in its
// worktree shares the base clone's .git (config, hooks) and the kingdom
// user's ~/.gitconfig. Whatever it writes there with real git commands, the
// general's next clone use (fetch, worktree add, worktree remove) must run
// none of it, keep the shared config Kingdom's own, and hand git no Slack or
// Jira token.
func TestWorkspace_AgentGitConfigNeverRunsInTheGeneral(t *testing.T) {
	const slack, jira, gh = "xoxb-secfix-slack-000111", "jira-secfix-token-000222", "ghp_secfixGitHubToken000333"
	t.Setenv("SLACK_BOT_TOKEN", slack)
	t.Setenv("JIRA_API_TOKEN", jira)
	t.Setenv("GH_TOKEN", gh)
	home := t.TempDir()
	t.Setenv("HOME", home) // the agent's `git config --global` lands here
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))

	// Every git the general runs goes through this wrapper, which records
	// the environment it was given.
	bin, marks := t.TempDir(), t.TempDir()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	envLog := filepath.Join(marks, "git-env.log")
	wrapper := "#!/bin/sh\nenv >> '" + envLog + "'\nexec '" + realGit + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	e := newEnv(t)
	withRepo(t, e)
	e.m.DefaultRepo = "acme/app"
	g := e.g0()
	ctx := context.Background()
	task := func(id string) *doc.Task {
		return &doc.Task{ID: id, TargetGeneral: e.m.Name, Type: "test.run", Payload: map[string]any{}}
	}
	ws1, err := g.prepareWorkspace(ctx, task("task-20260101-900"))
	if err != nil {
		t.Fatal(err)
	}

	// The agent, inside its worktree, with real git only.
	hooks := filepath.Join(marks, "hooks")
	os.MkdirAll(hooks, 0o700)
	for _, h := range []string{"post-checkout", "reference-transaction", "post-index-change"} {
		os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\nenv > '"+filepath.Join(marks, "hook-"+h)+"'\n"), 0o700)
	}
	agent := func(args ...string) {
		t.Helper()
		cmd := exec.Command(realGit, args...)
		cmd.Dir = ws1.RepoDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("agent git %v: %v\n%s", args, err, out)
		}
	}
	fsm := "env > '" + filepath.Join(marks, "fsmonitor") + "' #"
	agent("config", "core.fsmonitor", fsm)
	agent("config", "core.hooksPath", hooks)
	agent("config", "remote.origin.uploadpack", "env > '"+filepath.Join(marks, "uploadpack")+"'; git-upload-pack")
	agent("config", "--global", "core.fsmonitor", fsm)
	agent("config", "--global", "core.hooksPath", hooks)
	agent("config", "--global", "remote.origin.uploadpack", "env > '"+filepath.Join(marks, "global-uploadpack")+"'; git-upload-pack")
	// A hook written straight into the shared hooks dir.
	baseHook := filepath.Join(ws1.Clone, ".git", "hooks", "post-checkout")
	os.MkdirAll(filepath.Dir(baseHook), 0o700)
	os.WriteFile(baseHook, []byte("#!/bin/sh\nenv > '"+filepath.Join(marks, "base-hook")+"'\n"), 0o700)
	os.Remove(envLog)

	ws2, err := g.prepareWorkspace(ctx, task("task-20260101-901"))
	if err != nil {
		t.Fatalf("workspace after the agent's config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws2.RepoDir, "README.md")); err != nil {
		t.Errorf("second worktree not checked out: %v", err)
	}
	g.removeWorkspace(ctx, ws1)

	ents, _ := os.ReadDir(marks)
	for _, en := range ents {
		if n := en.Name(); n != "git-env.log" && n != "hooks" {
			b, _ := os.ReadFile(filepath.Join(marks, n))
			t.Errorf("the general ran the agent's command %q (env holds Slack token: %v)", n, strings.Contains(string(b), slack))
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(ws1.Clone, ".git", "config"))
	for _, k := range []string{"fsmonitor", "hookspath", "uploadpack"} {
		if strings.Contains(strings.ToLower(string(cfg)), k) {
			t.Errorf("base clone config still holds the agent's %s:\n%s", k, cfg)
		}
	}
	logged, err := os.ReadFile(envLog)
	if err != nil || len(logged) == 0 {
		t.Fatalf("the general ran no git through PATH: %v", err)
	}
	for name, v := range map[string]string{"SLACK_BOT_TOKEN": slack, "JIRA_API_TOKEN": jira} {
		if strings.Contains(string(logged), v) {
			t.Errorf("%s reached a git process the general ran", name)
		}
	}
}

// TestWorkspace_PrivateCloneOverHTTPUsesGHToken: with no global git config
// read, the general's git still clones a private repository over HTTPS with
// GH_TOKEN (real git smart HTTP through git http-backend).
func TestWorkspace_PrivateCloneOverHTTPUsesGHToken(t *testing.T) {
	const token = "ghp_secfixPrivateClone000444"
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "")
	backend := filepath.Join(strings.TrimSpace(run(t, "", "--exec-path")), "git-http-backend")
	root, _ := bareRepo(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "x-access-token" || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "auth", http.StatusUnauthorized)
			return
		}
		(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	e := newEnv(t)
	e.sys.Git.CloneURL = srv.URL + "/{repo}.git"
	e.m.DefaultRepo = "acme/app"
	g := e.g0()
	ctx := context.Background()
	tk := &doc.Task{ID: "task-20260101-910", TargetGeneral: e.m.Name, Type: "test.run", Payload: map[string]any{}}
	if _, err := g.prepareWorkspace(ctx, tk); err == nil {
		t.Fatal("a private clone without a token succeeded: the server does not check auth")
	}
	t.Setenv("GH_TOKEN", token)
	ws, err := g.prepareWorkspace(ctx, tk)
	if err != nil {
		t.Fatalf("private clone with GH_TOKEN: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws.RepoDir, "README.md")); string(b) != "v1" {
		t.Errorf("checkout README = %q, want v1", b)
	}
	if cfg, _ := os.ReadFile(filepath.Join(ws.Clone, ".git", "config")); strings.Contains(string(cfg), token) {
		t.Error("the token was written into the clone's config")
	}
}
