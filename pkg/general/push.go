package general

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/outputs"
)

// instructionPaths are the files and directories that configure an
// engine in a repository (SPEC §12.3): a PR task's worktree gets the base
// branch's, and a push never commits them back.
var instructionPaths = []string{"CLAUDE.md", "AGENTS.md", ".claude", ".codex", ".mcp.json"}

// baseFile, in the task dir, holds the commit the worktree was made at:
// a push's diff is taken against it.
const baseFile = ".kingdom-base"

// pusher is the github.push of a task's worktree (outputs.Pusher).
type pusher struct {
	g  *General
	ws workspace
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40,64}$`)

// Push commits the worktree's changes (but the instruction files) and
// pushes the commit, never forced, to branch; it refuses a push that
// touches a protected path, one over max_patch_kb, one to the default
// branch and one with nothing to push.
func (p *pusher) Push(ctx context.Context, branch, message, key string) (link, refused string, err error) {
	err = lockfile.With(layout.CloneLock(p.ws.Clone), func() error {
		// The agent could write the clone's config (a pushurl, an
		// insteadOf): Kingdom's goes back first.
		if err := p.g.restoreCloneConfig(p.ws); err != nil {
			return err
		}
		link, refused, err = p.push(ctx, branch, message, key)
		return err
	})
	return link, refused, err
}

func (p *pusher) push(ctx context.Context, branch, message, key string) (string, string, error) {
	dir := p.ws.RepoDir
	base := readTrim(filepath.Join(p.ws.TaskDir, baseFile))
	if !shaRE.MatchString(base) {
		return "", "the worktree's base commit is unknown", nil
	}
	if def := p.defaultBranch(ctx); def != "" && branch == def {
		return "", "a push never goes to the default branch", nil
	}
	if _, err := git(ctx, dir, "add", "-A"); err != nil {
		return "", "", err
	}
	for _, ip := range instructionPaths {
		_, _ = git(ctx, dir, "reset", "-q", "--", ip) // never committed back; absent ones are no error worth stopping for
	}
	if _, err := git(ctx, dir, "diff", "--cached", "--quiet"); err != nil {
		msg := strings.TrimSpace(message) + "\n\nKingdom-Output: " + key + "\n"
		if _, err := git(ctx, dir, "-c", "user.name=Kingdom", "-c", "user.email=kingdom@localhost", "-c", "commit.gpgsign=false",
			"commit", "-q", "--no-verify", "-m", msg); err != nil {
			return "", "", err
		}
	}
	head, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	head = strings.TrimSpace(head)
	if head == base {
		return "", "nothing to push: the worktree has no change since its base", nil
	}
	if _, err := git(ctx, dir, "merge-base", "--is-ancestor", base, head); err != nil {
		return "", "the worktree's commits do not descend from its base", nil
	}
	names, err := git(ctx, dir, "diff", "--name-only", "-z", "--no-renames", base, head)
	if err != nil {
		return "", "", err
	}
	changed := strings.Split(strings.TrimRight(names, "\x00"), "\x00")
	if bad := outputs.Protected(p.g.o.Manifest.Outputs.Protected(), changed); len(bad) > 0 {
		return "", "the push touches a protected path: " + strings.Join(clipList(bad, 10), ", "), nil
	}
	patch, err := git(ctx, dir, "diff", "--binary", base, head)
	if err != nil {
		return "", "", err
	}
	if max := p.g.o.Manifest.Outputs.MaxPatchBytes(); int64(len(patch)) > max {
		return "", fmt.Sprintf("the patch is %d KB, over outputs.max_patch_kb (%d)", (len(patch)+1023)>>10, max>>10), nil
	}
	// The commit by its id, to exactly one new branch, with no +: git
	// refuses anything but a fast-forward.
	if _, err := git(ctx, dir, "push", "--quiet", "--no-verify", "origin", head+":refs/heads/"+branch); err != nil {
		return "", "", err
	}
	return p.link(branch), "", nil
}

// Pushed reports the branch's link when the remote has the worktree's
// HEAD on it.
func (p *pusher) Pushed(ctx context.Context, branch string) (string, error) {
	out, err := git(ctx, p.ws.RepoDir, "ls-remote", "origin", "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	remote, _, _ := strings.Cut(strings.TrimSpace(out), "\t")
	head, err := git(ctx, p.ws.RepoDir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if remote == "" || remote != strings.TrimSpace(head) {
		return "", nil
	}
	return p.link(branch), nil
}

// defaultBranch is the remote's default branch as the clone knows it.
func (p *pusher) defaultBranch(ctx context.Context) string {
	out, err := git(ctx, p.ws.Clone, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(strings.TrimSpace(out), "refs/remotes/origin/")
}

// link is where a pushed branch is seen: the repository's web page when
// the clone URL is GitHub's https one, else the remote and branch.
func (p *pusher) link(branch string) string {
	u := strings.TrimSuffix(p.g.cloneURL(p.ws.Repo), ".git")
	if strings.HasPrefix(u, "https://") {
		return u + "/tree/" + branch
	}
	return u + "#" + branch
}

func clipList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}
