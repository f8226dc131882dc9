package general

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// bareRepo makes <root>/acme/app.git with one commit and returns root and a
// working clone used to push more commits.
func bareRepo(t *testing.T) (root, work string) {
	root = t.TempDir()
	bare := filepath.Join(root, "acme", "app.git")
	os.MkdirAll(bare, 0o755)
	run(t, bare, "init", "--bare", "-q", "-b", "main")
	work = t.TempDir()
	run(t, work, "clone", "-q", bare, ".")
	run(t, work, "checkout", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README.md"), []byte("v1"), 0o644)
	run(t, work, "add", ".")
	run(t, work, "commit", "-q", "-m", "v1")
	run(t, work, "push", "-q", "origin", "main")
	return root, work
}

func withRepo(t *testing.T, e *env) string {
	root, work := bareRepo(t)
	e.sys.Git.CloneURL = "file://" + root + "/{repo}.git"
	return work
}

func TestWorkspace_CloneThenFetchAndCleanCheckoutPerTask(t *testing.T) {
	e := newEnv(t)
	work := withRepo(t, e)
	e.m.DefaultRepo = "acme/app"
	e.scenario("task-20260101-100", map[string]any{"mode": "dirty"})
	e.start()
	e.task("task-20260101-100")
	if r := e.final("task-20260101-100"); r.Status != "success" {
		t.Fatalf("first task: %+v", r)
	}
	clone := e.l.RepoClone("gen-test", "acme/app")
	if _, err := os.Stat(filepath.Join(clone, ".git")); err != nil {
		t.Fatalf("no base clone at %s: %v", clone, err)
	}
	// A new commit upstream must reach the next task (git fetch).
	os.WriteFile(filepath.Join(work, "README.md"), []byte("v2"), 0o644)
	run(t, work, "commit", "-q", "-am", "v2")
	run(t, work, "push", "-q", "origin", "main")

	e.scenario("task-20260101-101", map[string]any{"mode": "hang"})
	e.task("task-20260101-101")
	e.tickUntil("second soldier", func() bool { return sessionOf(e, "task-20260101-101") != "" })
	repoDir := filepath.Join(e.l.TaskDir("gen-test", "task-20260101-101"), "repo")
	if b, _ := os.ReadFile(filepath.Join(repoDir, "README.md")); string(b) != "v2" {
		t.Errorf("second checkout README = %q, want v2 (fetched)", b)
	}
	if _, err := os.Stat(filepath.Join(repoDir, "dirty.txt")); err == nil {
		t.Error("a file left by the previous task leaked into the next checkout")
	}
	for _, f := range []string{"CLAUDE.md", "AGENTS.md", ".kingdom-task.json"} {
		if _, err := os.Stat(filepath.Join(e.l.TaskDir("gen-test", "task-20260101-101"), f)); err != nil {
			t.Errorf("task dir lacks %s", f)
		}
	}
	// SPEC §10.10: codex reads AGENTS.md only in its cwd (and git root).
	if _, err := os.Stat(filepath.Join(repoDir, "AGENTS.md")); err != nil {
		t.Errorf("the engine's cwd lacks AGENTS.md: %v", err)
	}
	if st := run(t, repoDir, "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("fresh checkout not clean: %q", st)
	}
	tmuxC.Kill(context.Background(), sessionOf(e, "task-20260101-101"))
	e.final("task-20260101-101")
	if out := run(t, clone, "worktree", "list"); strings.Contains(out, "task-20260101-101") {
		t.Errorf("worktree not removed:\n%s", out)
	}
}

func TestWorkspace_ParallelTasksGetSeparateWorktrees(t *testing.T) {
	e := newEnv(t)
	withRepo(t, e)
	e.m.MaxConcurrent = 2
	e.scenario("", map[string]any{"mode": "success", "sleep_ms": 800})
	e.start()
	e.task("task-20260101-110", func(t *doc.Task) { t.Repo = doc.StringPtr("acme/app") })
	e.task("task-20260101-111", func(t *doc.Task) { t.Repo = doc.StringPtr("acme/app") })
	e.final("task-20260101-110")
	e.final("task-20260101-111")
	a, b := e.call("task-20260101-110").Cwd, e.call("task-20260101-111").Cwd
	if a == b || !strings.HasSuffix(a, "task-20260101-110/repo") || !strings.HasSuffix(b, "task-20260101-111/repo") {
		t.Fatalf("working trees: %s and %s", a, b)
	}
}

func TestReconcile_OrphanedTasksAfterRestart(t *testing.T) {
	e := newEnv(t)
	q := func(id string, rc int) *doc.Task {
		return e.claimed(id, func(tk *doc.Task) { tk.Status, tk.RetryCount = doc.TaskInProgress, rc })
	}
	// (d) nothing left: SoldierDied.
	q("task-20260101-200", 1)
	// (a) a raw result exists: finished from it.
	q("task-20260101-201", 0)
	os.WriteFile(e.l.ResultRaw("task-20260101-201"), []byte(`{"task_id":"task-20260101-201","status":"success","summary":"done before the crash"}`), 0o600)
	// (b) a final result for this attempt (published: the claim is
	// released): untouched.
	if err := e.g0().publish(t.Context(), q("task-20260101-202", 2), nil, &doc.Result{RawResult: doc.RawResult{TaskID: "task-20260101-202",
		Status: doc.ResultSuccess, Summary: "s"}, General: "gen-test", CompletedAt: "2026-01-01T00:00:00Z", RetryCount: 2}); err != nil {
		t.Fatal(err)
	}
	final, _ := os.ReadFile(e.l.ResultFinal("task-20260101-202"))
	// (c) a live registered soldier: re-attached and followed to its result.
	tk := q("task-20260101-203", 0)
	e.scenario("task-20260101-203", map[string]any{"mode": "success", "sleep_ms": 700})
	os.WriteFile(e.l.Prompt(tk.ID), []byte("p"), 0o600)
	wd := t.TempDir()
	sid := "soldier-1-live"
	sessions.New(e.l).Add(sessions.Entry{ID: sid, TaskID: tk.ID, General: "gen-test", StartedAt: time.Now().UTC()})
	if _, err := spawn.Launch(context.Background(), tmuxC, spawnBin, spawn.Params{BaseDir: e.l.Base, TaskID: tk.ID,
		General: "gen-test", PromptFile: e.l.Prompt(tk.ID), Workdir: wd, SoldierID: sid}, nil); err != nil {
		t.Fatal(err)
	}

	e.start() // the "restarted" general
	r0 := e.final("task-20260101-200")
	if r0.Status != "killed" || r0.ErrorReason != doc.ReasonSoldierDied || r0.RetryCount != 1 {
		t.Errorf("orphan: %+v", r0)
	}
	if r1 := e.final("task-20260101-201"); r1.Status != "success" || r1.Summary != "done before the crash" {
		t.Errorf("raw-finished: %+v", r1)
	}
	if b, _ := os.ReadFile(e.l.ResultFinal("task-20260101-202")); string(b) != string(final) {
		t.Errorf("final result of the current attempt was rewritten: %s", b)
	}
	r3 := e.final("task-20260101-203")
	if r3.Status != "success" || r3.SoldierID != sid {
		t.Errorf("re-attached: %+v", r3)
	}
	if es, _ := sessions.New(e.l).List(); len(es) != 0 {
		t.Errorf("registry not cleaned: %v", es)
	}
}

// g0 is a general not started (its workspace code called directly).
func (e *env) g0() *General {
	if e.g == nil {
		g, err := New(Options{Layout: e.l, Manifest: e.m, System: e.sys, Tmux: tmuxC, Store: e.store(), Host: e.host})
		if err != nil {
			e.t.Fatal(err)
		}
		return g
	}
	return e.g
}

func TestInstall_RoundTripOfBuiltinPackages(t *testing.T) {
	l := layout.New(t.TempDir())
	for _, name := range []string{"gen-pr", "gen-herald", "gen-briefing"} {
		dir := filepath.Join("..", "..", "generals", name)
		got, err := Install(l, dir)
		if err != nil || got != name {
			t.Fatalf("install %s: %v (%q)", name, err, got)
		}
		want, _ := os.ReadFile(filepath.Join(dir, "prompt.md"))
		if b, _ := os.ReadFile(l.Template(name)); string(b) != string(want) || !strings.Contains(string(b), "KINGDOM_RESULT_PATH") {
			t.Errorf("%s template not installed verbatim or lacks the result contract", name)
		}
		if err := Uninstall(l, name); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{l.GeneralManifest(name), l.Template(name)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s left after uninstall", p)
			}
		}
	}
	if err := Uninstall(l, "gen-pr"); err == nil {
		t.Error("uninstalling a missing general should fail")
	}
	if err := Uninstall(l, "../etc"); err == nil {
		t.Error("an invalid name must be refused")
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "manifest.yaml"), []byte("name: not-a-general\n"), 0o600)
	os.WriteFile(filepath.Join(bad, "prompt.md"), []byte("x"), 0o600)
	if _, err := Install(l, bad); err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("invalid manifest: err = %v", err)
	}
}

func TestMemory_CapTrimsOldest(t *testing.T) {
	e := newEnv(t)
	e.m.Memory.MaxKB = 1
	g := e.start()
	for i := 0; i < 40; i++ {
		if err := g.appendMemory("task-x", []string{fmt.Sprintf("lesson %02d\nsecond line", i)}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(e.l.MemoryGeneral("gen-test"), "learned-patterns.md"))
	if len(b) > 1024 {
		t.Fatalf("memory is %d bytes, cap 1024", len(b))
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasSuffix(last, "lesson 39 second line") {
		t.Errorf("newest entry missing; last line %q", last)
	}
	if strings.Contains(string(b), "lesson 00 ") {
		t.Error("oldest entry should have been trimmed first")
	}
	if !strings.HasPrefix(string(b), "# Learned patterns") {
		t.Error("header lost")
	}
}

func TestRender_NeverReexpandsPayload(t *testing.T) {
	got := Render("{{task_id}}|{{payload.a}}|{{ payload.b.c }}|{{unknown}}|{{REPO}}", Vars{TaskID: "t1", Repo: "o/r",
		Payload: map[string]any{"a": "{{task_id}} $(x) `y`", "b": map[string]any{"c": 3}}})
	want := "t1|{{task_id}} $(x) `y`|3|{{unknown}}|o/r"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

// A repo whose own AGENTS.md is a symlink (here dangling) keeps it: the
// general neither follows nor replaces it, and the task runs.
func TestWorkspace_RepoAgentsSymlinkIsTheRepos(t *testing.T) {
	e := newEnv(t)
	work := withRepo(t, e)
	if err := os.Symlink("docs/missing.md", filepath.Join(work, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	run(t, work, "add", ".")
	run(t, work, "commit", "-q", "-m", "agents link")
	run(t, work, "push", "-q", "origin", "main")
	e.m.DefaultRepo = "acme/app"
	e.scenario("task-20260101-110", map[string]any{"mode": "hang"})
	e.start()
	e.task("task-20260101-110")
	e.tickUntil("soldier", func() bool { return sessionOf(e, "task-20260101-110") != "" })
	link := filepath.Join(e.l.TaskDir("gen-test", "task-20260101-110"), "repo", "AGENTS.md")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the repo's AGENTS.md link was not kept: %v %v", fi, err)
	}
	tmuxC.Kill(context.Background(), sessionOf(e, "task-20260101-110"))
	e.final("task-20260101-110")
}

// A restarted general whose sessions.json lost a live soldier (truncated
// to nothing) re-attaches it from the soldier id the soldier recorded,
// re-registers it, and follows it to its result: it is not declared dead.
func TestReconcile_LiveSoldierMissingFromTruncatedRegistryIsReattached(t *testing.T) {
	e := newEnv(t)
	const id = "task-20260101-210"
	e.claimed(id, func(tk *doc.Task) { tk.Status = doc.TaskInProgress })
	e.scenario(id, map[string]any{"mode": "success", "sleep_ms": 3000})
	os.WriteFile(e.l.Prompt(id), []byte("p"), 0o600)
	const sid = "soldier-1-live"
	if err := sessions.New(e.l).Add(sessions.Entry{ID: sid, TaskID: id, General: "gen-test", StartedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if _, err := spawn.Launch(context.Background(), tmuxC, spawnBin, spawn.Params{BaseDir: e.l.Base, TaskID: id,
		General: "gen-test", PromptFile: e.l.Prompt(id), Workdir: t.TempDir(), SoldierID: sid}, nil); err != nil {
		t.Fatal(err)
	}
	for readTrim(e.l.ResultSoldierID(id)) != sid {
		time.Sleep(10 * time.Millisecond) // the soldier records its id as it starts
	}
	if err := os.Truncate(e.l.SessionsJSON(), 0); err != nil {
		t.Fatal(err)
	}
	g := e.start()
	if err := g.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if es, _ := sessions.New(e.l).List(); len(es) != 1 || es[0].ID != sid || es[0].TaskID != id {
		t.Errorf("registry after the reconcile = %+v, want the live soldier re-registered", es)
	}
	r := e.final(id)
	if r.Status != doc.ResultSuccess || r.SoldierID != sid {
		t.Errorf("final = %s/%s soldier %s, want success from %s", r.Status, r.ErrorReason, r.SoldierID, sid)
	}
	if n := len(e.events("soldier.killed")); n != 0 {
		t.Errorf("soldier.killed emitted %d times for a live soldier", n)
	}
}
