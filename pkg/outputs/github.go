package outputs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GitHub is the small REST client of the writes (and of the general's
// reads of a pull request).
type GitHub struct {
	base  *url.URL
	token string
	http  *http.Client
}

// ErrNoGitHubToken: a write was asked with no write token configured.
var ErrNoGitHubToken = errors.New("no GitHub write token (GH_TOKEN or GITHUB_TOKEN in kingdom.env)")

// GitHub returns the client of s's GitHub API.
func (s Services) GitHub() (*GitHub, error) {
	u, err := url.Parse(strings.TrimRight(s.GitHubAPI, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("github api url %q: expected an http(s) URL", s.GitHubAPI)
	}
	return &GitHub{base: u, token: s.GitHubToken, http: s.client()}, nil
}

// Writable reports whether the client holds a write token.
func (g *GitHub) Writable() bool { return g.token != "" }

// maxBody bounds what one response may be read as.
const maxBody = 8 << 20

// StatusError is a GitHub answer that is not a 2xx.
type StatusError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("github %s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

func (g *GitHub) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := *g.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = query.Encode()
	status, b, err := call(ctx, g.http, method, u, in, func(req *http.Request) {
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
		if g.token != "" {
			req.Header.Set("Authorization", "Bearer "+g.token)
		}
	})
	if err != nil {
		return fmt.Errorf("github %s %s: %w", method, path, err)
	}
	if status/100 != 2 {
		var m struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &m)
		if m.Message == "" {
			m.Message = http.StatusText(status)
		}
		return &StatusError{Method: method, Path: path, Status: status, Message: m.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("github %s %s: decode: %w", method, path, err)
	}
	return nil
}

// call sends in (JSON, when not nil) to u with the headers set adds, and
// returns the answer's status and body (at most maxBody).
func call(ctx context.Context, c *http.Client, method string, u url.URL, in any, set func(*http.Request)) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	set(req)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("read: %w", err)
	}
	return resp.StatusCode, b, nil
}

// pages reads a list endpoint page by page (100 a page, at most maxPages).
func pages[T any](ctx context.Context, g *GitHub, path string, q url.Values, maxPages int) ([]T, error) {
	var all []T
	if q == nil {
		q = url.Values{}
	}
	q.Set("per_page", "100")
	for p := 1; p <= maxPages; p++ {
		q.Set("page", strconv.Itoa(p))
		var one []T
		if err := g.do(ctx, http.MethodGet, path, q, nil, &one); err != nil {
			return all, err
		}
		all = append(all, one...)
		if len(one) < 100 {
			break
		}
	}
	return all, nil
}

func repoPath(repo string) string {
	owner, name, _ := strings.Cut(repo, "/")
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// Repo is what the writes need of a repository.
type Repo struct {
	FullName      string `json:"full_name"`
	DefaultBranch string `json:"default_branch"`
	HTMLURL       string `json:"html_url"`
}

// Repo reads a repository.
func (g *GitHub) Repo(ctx context.Context, repo string) (Repo, error) {
	var r Repo
	err := g.do(ctx, http.MethodGet, repoPath(repo), nil, nil, &r)
	return r, err
}

// User is an author.
type User struct {
	Login string `json:"login"`
}

// PullRequest is a pull request as the general prepares it.
type PullRequest struct {
	Number  int    `json:"number"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	State   string `json:"state"`
	Draft   bool   `json:"draft"`
	Merged  bool   `json:"merged"`
	HTMLURL string `json:"html_url"`
	User    User   `json:"user"`
	Head    struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"base"`
}

// PullRequest reads pull request n.
func (g *GitHub) PullRequest(ctx context.Context, repo string, n int) (PullRequest, error) {
	var pr PullRequest
	err := g.do(ctx, http.MethodGet, fmt.Sprintf("%s/pulls/%d", repoPath(repo), n), nil, nil, &pr)
	return pr, err
}

// PullFile is one changed file of a pull request.
type PullFile struct {
	Filename  string `json:"filename"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

// PullFiles lists the changed files of pull request n (GitHub lists at
// most 3000).
func (g *GitHub) PullFiles(ctx context.Context, repo string, n int) ([]PullFile, error) {
	return pages[PullFile](ctx, g, fmt.Sprintf("%s/pulls/%d/files", repoPath(repo), n), nil, 30)
}

// Comment is an issue comment, a review, or a review's line comment.
type Comment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	User    User   `json:"user"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	State   string `json:"state,omitempty"` // reviews
}

// ReviewComments lists the line comments of pull request n.
func (g *GitHub) ReviewComments(ctx context.Context, repo string, n int) ([]Comment, error) {
	return pages[Comment](ctx, g, fmt.Sprintf("%s/pulls/%d/comments", repoPath(repo), n), nil, 10)
}

// Reviews lists the reviews of pull request n.
func (g *GitHub) Reviews(ctx context.Context, repo string, n int) ([]Comment, error) {
	return pages[Comment](ctx, g, fmt.Sprintf("%s/pulls/%d/reviews", repoPath(repo), n), nil, 10)
}

// IssueComments lists the conversation comments of issue or PR n.
func (g *GitHub) IssueComments(ctx context.Context, repo string, n int) ([]Comment, error) {
	return pages[Comment](ctx, g, fmt.Sprintf("%s/issues/%d/comments", repoPath(repo), n), nil, 10)
}

// CreateReview posts a review (event COMMENT or REQUEST_CHANGES) with its
// line comments on the PR's head; it returns the review's link.
func (g *GitHub) CreateReview(ctx context.Context, repo string, n int, event, body string, comments []LineComment) (string, error) {
	if !g.Writable() {
		return "", ErrNoGitHubToken
	}
	in := map[string]any{"event": event, "body": body}
	if len(comments) > 0 {
		in["comments"] = comments
	}
	var out Comment
	if err := g.do(ctx, http.MethodPost, fmt.Sprintf("%s/pulls/%d/reviews", repoPath(repo), n), nil, in, &out); err != nil {
		return "", err
	}
	return out.HTMLURL, nil
}

// LineComment is a review comment as the API takes it.
type LineComment struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Side string `json:"side"`
	Body string `json:"body"`
}

// CreateComment posts a conversation comment on issue or PR n.
func (g *GitHub) CreateComment(ctx context.Context, repo string, n int, body string) (string, error) {
	if !g.Writable() {
		return "", ErrNoGitHubToken
	}
	var out Comment
	if err := g.do(ctx, http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", repoPath(repo), n), nil, map[string]any{"body": body}, &out); err != nil {
		return "", err
	}
	return out.HTMLURL, nil
}

// CreatePull opens a pull request from head into base.
func (g *GitHub) CreatePull(ctx context.Context, repo, head, base, title, body string) (string, error) {
	if !g.Writable() {
		return "", ErrNoGitHubToken
	}
	var out PullRequest
	in := map[string]any{"head": head, "base": base, "title": title, "body": body}
	if err := g.do(ctx, http.MethodPost, repoPath(repo)+"/pulls", nil, in, &out); err != nil {
		return "", err
	}
	return out.HTMLURL, nil
}

// FindPull returns the link of a pull request (any state) from branch
// head of repo's owner, "" when there is none.
func (g *GitHub) FindPull(ctx context.Context, repo, head string) (string, error) {
	owner, _, _ := strings.Cut(repo, "/")
	var out []PullRequest
	q := url.Values{"head": {owner + ":" + head}, "state": {"all"}}
	if err := g.do(ctx, http.MethodGet, repoPath(repo)+"/pulls", q, nil, &out); err != nil {
		return "", err
	}
	if len(out) == 0 {
		return "", nil
	}
	return out[0].HTMLURL, nil
}

// findMarked returns the link of the first comment whose body carries
// marker, "" when none does.
func findMarked(cs []Comment, marker string) string {
	for _, c := range cs {
		if strings.Contains(c.Body, marker) {
			if c.HTMLURL == "" {
				return "(posted)"
			}
			return c.HTMLURL
		}
	}
	return ""
}
