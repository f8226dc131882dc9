package general

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

var repoRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// kingdomFiles are the files Kingdom places in a task dir; they are listed
// in the clone's info/exclude so they never show up as changes.
var kingdomFiles = []string{"CLAUDE.md", "AGENTS.md", ".kingdom-task.json"}

// workspace is one task's working area (§9.9).
type workspace struct {
	TaskDir string // workspace/<general>/tasks/<task>/
	RepoDir string // the engine's cwd: TaskDir/repo (or a resumed task's workdir)
	Repo    string // owner/name, "" for none
	Clone   string // base clone, "" for none
	// Borrowed is set when RepoDir belongs to another task (resume, §9.8).
	Borrowed bool
	// PR is the pull request a github.pr.* task's worktree checks out
	// (pullrequest.go); nil for other tasks and once the workspace is
	// made (the task file keeps it).
	PR *PullRequest
}

func (g *General) taskRepo(t *doc.Task) (string, error) {
	repo := doc.Deref(t.Repo)
	if repo == "" {
		repo = g.o.Manifest.DefaultRepo
	}
	if repo == "" {
		return "", nil
	}
	if !repoRE.MatchString(repo) || strings.Contains(repo, "..") {
		return "", fmt.Errorf("task %s: repo %q is not owner/name", t.ID, repo)
	}
	return repo, nil
}

// workspaceOf computes the task's workspace paths without touching disk.
func (g *General) workspaceOf(t *doc.Task) workspace {
	l := g.o.Layout
	ws := workspace{TaskDir: l.TaskDir(g.name, t.ID)}
	ws.RepoDir = filepath.Join(ws.TaskDir, "repo")
	if repo, err := g.taskRepo(t); err == nil && repo != "" {
		ws.Repo, ws.Clone = repo, l.RepoClone(g.name, repo)
	}
	if wd := g.resumeWorkdir(t); wd != "" {
		ws.RepoDir, ws.TaskDir, ws.Borrowed = wd, filepath.Dir(wd), true
	}
	return ws
}

// resumeWorkdir returns a resume task's workdir when it is a live task dir
// of this general (never a path outside the workspace).
func (g *General) resumeWorkdir(t *doc.Task) string {
	if t.Workdir == "" {
		return ""
	}
	root := filepath.Join(g.o.Layout.WorkspaceGeneral(g.name), "tasks")
	wd := filepath.Clean(t.Workdir)
	rel, err := filepath.Rel(root, wd)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		return ""
	}
	return wd
}

// prepareWorkspace builds the task's workspace: a fresh worktree of the
// base clone (cloned or fetched first), or the resumed task's workdir, and
// writes the task files into it.
func (g *General) prepareWorkspace(ctx context.Context, t *doc.Task) (workspace, error) {
	ws := g.workspaceOf(t)
	if _, err := g.taskRepo(t); err != nil {
		return ws, err
	}
	if !ws.Borrowed {
		// A leftover from an earlier attempt of this task is never reused:
		// a killed soldier's edits must not leak into the retry.
		g.removeWorkspace(ctx, ws)
		if err := layout.EnsureDir(ws.TaskDir); err != nil {
			return ws, err
		}
		if ws.Repo == "" {
			if err := layout.EnsureDir(ws.RepoDir); err != nil {
				return ws, err
			}
		} else {
			pr, err := g.pullRequestOf(ctx, t, ws.Repo)
			if err != nil {
				return ws, err
			}
			ws.PR = pr
			if err := g.addWorktree(ctx, ws); err != nil {
				return ws, err
			}
		}
	}
	return ws, g.writeTaskFiles(t, ws)
}

func (g *General) addWorktree(ctx context.Context, ws workspace) error {
	if err := layout.EnsureDir(filepath.Dir(ws.Clone)); err != nil {
		return err
	}
	return lockfile.With(layout.CloneLock(ws.Clone), func() error {
		if err := g.syncClone(ctx, ws); err != nil {
			return err
		}
		if ws.PR != nil {
			if err := g.checkoutPR(ctx, ws, ws.PR); err != nil {
				return err
			}
		} else {
			ref := "origin/HEAD"
			if _, err := git(ctx, ws.Clone, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/HEAD"); err != nil {
				ref = "HEAD"
			}
			if _, err := git(ctx, ws.Clone, "worktree", "add", "--detach", "--force", ws.RepoDir, ref); err != nil {
				return fmt.Errorf("add worktree for %s: %w", ws.Repo, err)
			}
		}
		// A push's diff is taken against the commit the worktree starts at.
		head, err := git(ctx, ws.RepoDir, "rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("add worktree for %s: %w", ws.Repo, err)
		}
		if err := writeTaskFile(filepath.Join(ws.TaskDir, baseFile), []byte(strings.TrimSpace(head)+"\n")); err != nil {
			return err
		}
		_ = atomicfile.Touch(layout.CloneUsedMarker(ws.Clone)) // retention.clone_days counts from here
		return nil
	})
}

// syncClone clones the repo the first time and fetches afterwards. Runs
// under the per-repo lock.
func (g *General) syncClone(ctx context.Context, ws workspace) error {
	if _, err := os.Stat(filepath.Join(ws.Clone, ".git")); err == nil {
		if err := g.restoreCloneConfig(ws); err != nil {
			return fmt.Errorf("fetch %s: %w", ws.Repo, err)
		}
		if _, err := git(ctx, ws.Clone, "fetch", "--prune", "--quiet", "origin"); err != nil {
			return fmt.Errorf("fetch %s: %w", ws.Repo, err)
		}
		_, _ = git(ctx, ws.Clone, "worktree", "prune")
		return nil
	}
	_ = os.RemoveAll(ws.Clone) // a half-made clone from a crash
	url := g.cloneURL(ws.Repo)
	if _, err := git(ctx, "", "clone", "--quiet", "--no-checkout", "-c", cloneSharedMode, "--", url, ws.Clone); err != nil {
		_ = os.RemoveAll(ws.Clone)
		return fmt.Errorf("clone %s: %w", ws.Repo, err)
	}
	if err := tightenModes(ws.Clone); err != nil {
		return fmt.Errorf("clone %s: modes: %w", ws.Repo, err)
	}
	if err := g.restoreCloneConfig(ws); err != nil {
		return fmt.Errorf("clone %s: %w", ws.Repo, err)
	}
	exclude := filepath.Join(ws.Clone, ".git", "info", "exclude")
	_ = os.MkdirAll(filepath.Dir(exclude), 0o700)
	f, err := os.OpenFile(exclude, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		fmt.Fprintf(f, "\n# Kingdom task files\n%s\n", strings.Join(kingdomFiles, "\n"))
		f.Close()
	}
	return nil
}

// removeWorkspace deletes a task dir and its worktree registration.
func (g *General) removeWorkspace(ctx context.Context, ws workspace) {
	if _, err := os.Stat(ws.TaskDir); errors.Is(err, fs.ErrNotExist) {
		return
	}
	if ws.Clone != "" {
		if _, err := os.Stat(filepath.Join(ws.Clone, ".git")); err == nil {
			_ = lockfile.With(layout.CloneLock(ws.Clone), func() error {
				_ = g.restoreCloneConfig(ws)
				_, _ = git(ctx, ws.Clone, "worktree", "remove", "--force", "--force", ws.RepoDir)
				_ = removeTree(ws.TaskDir)
				_, _ = git(ctx, ws.Clone, "worktree", "prune")
				return nil
			})
		}
	}
	if err := removeTree(ws.TaskDir); err != nil {
		g.log.Error("task dir not removed", "dir", ws.TaskDir, "err", err)
		g.emit("system.cleanup_failed", map[string]any{"path": ws.TaskDir, "error": err.Error()})
	}
}

// git runs git with argv (never a shell); dir "" runs in the current dir.
// No config an agent can write makes it run a command, and it holds no
// Slack or Jira token (gitsafe.go).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	sub := args[0]
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	args = append(append([]string(nil), gitSafetyArgs...), args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = gitEnv(os.Environ())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", sub, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// TaskFile is .kingdom-task.json in a task dir.
type TaskFile struct {
	TaskID        string `json:"task_id"`
	General       string `json:"general"`
	Type          string `json:"type"`
	Repo          string `json:"repo,omitempty"`
	RepoDir       string `json:"repo_dir"`
	ResultPath    string `json:"result_path"`
	HeartbeatPath string `json:"heartbeat_path"`
	RetryCount    int    `json:"retry_count"`
	// PullRequest is the PR a github.pr.* task is about, as GitHub has it
	// (untrusted text, SPEC §12.3).
	PullRequest *PullRequest `json:"pull_request,omitempty"`
}

// writeTaskFiles writes the task's instruction files and
// .kingdom-task.json.
func (g *General) writeTaskFiles(t *doc.Task, ws workspace) error {
	l := g.o.Layout
	base := readOr(l.WorkspaceClaudeMD(), defaultWorkspaceClaude)
	claudeExtra := readOr(filepath.Join(l.TemplatesDir(), g.name+"-claude.md"), "")
	codexExtra := readOr(filepath.Join(l.TemplatesDir(), g.name+"-codex.md"), claudeExtra)
	instr := strings.TrimSpace(g.o.Manifest.Instructions)
	compose := func(extra string) []byte {
		var b strings.Builder
		b.WriteString(strings.TrimRight(base, "\n"))
		b.WriteString("\n")
		if instr != "" || strings.TrimSpace(extra) != "" {
			fmt.Fprintf(&b, "\n## %s\n\n", g.name)
			if instr != "" {
				b.WriteString(instr + "\n")
			}
			if strings.TrimSpace(extra) != "" {
				b.WriteString("\n" + strings.TrimRight(extra, "\n") + "\n")
			}
		}
		return []byte(b.String())
	}
	if err := writeTaskFile(filepath.Join(ws.TaskDir, "CLAUDE.md"), compose(claudeExtra)); err != nil {
		return err
	}
	if err := writeTaskFile(filepath.Join(ws.TaskDir, "AGENTS.md"), compose(codexExtra)); err != nil {
		return err
	}
	// Codex reads AGENTS.md only from its cwd and the git root, not from
	// the task dir above them (SPEC §10.10): place it in the cwd too, unless
	// the repo has its own (git ignores ours through info/exclude).
	// Lstat: any entry counts as the repo's own (a dangling symlink too).
	inCwd := filepath.Join(ws.RepoDir, "AGENTS.md")
	if _, err := os.Lstat(inCwd); err != nil {
		if err := writeTaskFile(inCwd, compose(codexExtra)); err != nil {
			return err
		}
	}
	tf := TaskFile{TaskID: t.ID, General: g.name, Type: t.Type, Repo: ws.Repo, RepoDir: ws.RepoDir,
		ResultPath: l.ResultStaging(t.ID), HeartbeatPath: l.ResultHeartbeat(t.ID), RetryCount: t.RetryCount, PullRequest: ws.PR}
	b, _ := json.MarshalIndent(tf, "", "  ")
	return writeTaskFile(filepath.Join(ws.TaskDir, ".kingdom-task.json"), append(b, '\n'))
}

// writeTaskFile writes a file of the attempt's workspace (or its prompt)
// before its soldier starts: atomicfile.WritePrivate, no fsync, as nothing
// reads it after a crash (the attempt a crash ends runs again, and writes
// its files anew). Whatever was at path goes first, so a symlink or hard
// link an agent left in a resumed task's dir is replaced, never written
// through.
func writeTaskFile(path string, data []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.WritePrivate(path, data, 0o600)
}

func readOr(path, def string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	return string(b)
}
