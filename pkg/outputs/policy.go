package outputs

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Target is where a task's outputs go, from its task.
type Target struct {
	TaskID  string
	Repo    string // owner/name; "" refuses every github.* output
	PR      int    // the pull request a review or comment is about; 0 none
	Issue   int    // the issue a comment is about when there is no PR
	JiraKey string // the issue a jira.comment goes to
}

// Limits on what an output may carry (GitHub's own limit on a body is
// 65536 characters).
const (
	maxBodyChars   = 65000
	maxLineComment = 100
)

var suffixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`)

// Branch is the branch a push of task goes to: kingdom/<task>, or
// kingdom/<task>-<suffix>.
func Branch(task, suffix string) string {
	if suffix == "" {
		return "kingdom/" + task
	}
	return "kingdom/" + task + "-" + suffix
}

// refusal says why output i of outs may not run under policy p for t
// ("" when it may): a kind not allowed, one past its kind's max, a field
// missing or out of bounds, or no place for it to go.
func refusal(p config.ManifestOutputs, outs []doc.Output, i int, t Target) string {
	o := outs[i]
	if !p.Allows(o.Kind) {
		return fmt.Sprintf("%s is not in the manifest's outputs.allow", o.Kind)
	}
	n := 0
	for _, x := range outs[:i] {
		if x.Kind == o.Kind {
			n++
		}
	}
	if max := p.MaxOf(o.Kind); n >= max {
		return fmt.Sprintf("over outputs.max for %s (%d per attempt)", o.Kind, max)
	}
	if strings.HasPrefix(o.Kind, "github.") && t.Repo == "" {
		return "the task names no repository"
	}
	switch o.Kind {
	case doc.OutputGitHubReview:
		if o.Event != "COMMENT" && o.Event != "REQUEST_CHANGES" {
			return fmt.Sprintf("a review's event is COMMENT or REQUEST_CHANGES, got %q", o.Event)
		}
		if t.PR == 0 {
			return "the task is about no pull request"
		}
		if strings.TrimSpace(o.Body) == "" && len(o.Comments) == 0 {
			return "the review has no body and no comments"
		}
		if len(o.Comments) > maxLineComment {
			return fmt.Sprintf("the review has %d line comments (at most %d)", len(o.Comments), maxLineComment)
		}
		for j, c := range o.Comments {
			if c.Line < 1 || !relPath(c.Path) || strings.TrimSpace(c.Body) == "" || len(c.Body) > maxBodyChars {
				return fmt.Sprintf("line comment %d needs a repository path, a line ≥ 1 and a body", j)
			}
		}
	case doc.OutputGitHubComment:
		if t.PR == 0 && t.Issue == 0 {
			return "the task is about no pull request or issue"
		}
	case doc.OutputGitHubPush:
		if o.BranchSuffix != "" && !suffixRE.MatchString(o.BranchSuffix) {
			return fmt.Sprintf("branch_suffix must match %s, got %q", suffixRE, clip(o.BranchSuffix, 60))
		}
		if strings.TrimSpace(o.Message) == "" {
			return "the push has no commit message"
		}
	case doc.OutputGitHubPullRequest:
		if strings.TrimSpace(o.Title) == "" {
			return "the pull request has no title"
		}
	case doc.OutputJiraComment:
		if t.JiraKey == "" {
			return "the task is about no Jira issue"
		}
	}
	switch o.Kind {
	case doc.OutputGitHubReview, doc.OutputGitHubComment, doc.OutputJiraComment:
		if o.Kind != doc.OutputGitHubReview && strings.TrimSpace(o.Body) == "" {
			return "the body is empty"
		}
	}
	if len(o.Body) > maxBodyChars || len(o.Title) > 1024 || len(o.Message) > maxBodyChars {
		return fmt.Sprintf("the body is over %d characters", maxBodyChars)
	}
	return ""
}

func relPath(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && path.Clean(p) == p && p != ".." && !strings.HasPrefix(p, "../")
}

// Protected returns the paths of changed that match one of the globs: a
// glob with no slash matches a file or directory of that name at any depth
// (CLAUDE.md protects sub/CLAUDE.md too); one with a slash is anchored at
// the repository's root, and ** spans directories (.github/** is
// everything under .github).
func Protected(globs, changed []string) []string {
	var out []string
	for _, p := range changed {
		for _, g := range globs {
			if matchGlob(g, p) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func matchGlob(glob, p string) bool {
	glob = strings.TrimSuffix(glob, "/")
	segs := strings.Split(p, "/")
	if !strings.Contains(glob, "/") {
		for _, s := range segs {
			if ok, _ := path.Match(glob, s); ok {
				return true
			}
		}
		return false
	}
	return matchSegs(strings.Split(strings.TrimPrefix(glob, "/"), "/"), segs)
}

func matchSegs(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			if len(g) == 1 {
				return len(p) > 0
			}
			for k := 0; k <= len(p); k++ {
				if matchSegs(g[1:], p[k:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	// A directory glob protects what is under it.
	return true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
