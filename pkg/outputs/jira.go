package outputs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Jira is the small REST client of jira.comment.
type Jira struct {
	base         *url.URL
	email, token string
	http         *http.Client
}

// ErrNoJira: a jira.comment was asked with no Jira site or token.
var ErrNoJira = errors.New("no Jira site or token (polling.jira.url or JIRA_URL, JIRA_USER_EMAIL, JIRA_API_TOKEN)")

// Jira returns the client of s's Jira site.
func (s Services) Jira() (*Jira, error) {
	if s.JiraURL == "" || s.JiraToken == "" {
		return nil, ErrNoJira
	}
	u, err := url.Parse(strings.TrimRight(s.JiraURL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("jira url %q: expected an http(s) URL", s.JiraURL)
	}
	return &Jira{base: u, email: s.JiraEmail, token: s.JiraToken, http: s.client()}, nil
}

func (j *Jira) do(ctx context.Context, method, path string, in, out any) error {
	u := *j.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + path
	status, b, err := call(ctx, j.http, method, u, in, func(req *http.Request) {
		req.Header.Set("Accept", "application/json")
		req.SetBasicAuth(j.email, j.token)
	})
	if err != nil {
		return fmt.Errorf("jira %s %s: %w", method, path, err)
	}
	if status/100 != 2 {
		return fmt.Errorf("jira %s %s: %d %s", method, path, status, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func issuePath(key string) string { return "/rest/api/3/issue/" + url.PathEscape(key) + "/comment" }

// link is the browser address of comment id on issue key.
func (j *Jira) link(key, id string) string {
	return j.base.String() + "/browse/" + url.PathEscape(key) + "?focusedCommentId=" + url.QueryEscape(id)
}

// adf is body as an Atlassian document: one paragraph per line.
func adf(body string) map[string]any {
	var paras []any
	for _, line := range strings.Split(body, "\n") {
		p := map[string]any{"type": "paragraph", "content": []any{}}
		if line != "" {
			p["content"] = []any{map[string]any{"type": "text", "text": line}}
		}
		paras = append(paras, p)
	}
	return map[string]any{"type": "doc", "version": 1, "content": paras}
}

// AddComment posts body on issue key and returns the comment's link.
func (j *Jira) AddComment(ctx context.Context, key, body string) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := j.do(ctx, http.MethodPost, issuePath(key), map[string]any{"body": adf(body)}, &out); err != nil {
		return "", err
	}
	return j.link(key, out.ID), nil
}

// FindComment returns the link of the newest comment of issue key whose
// text carries marker, "" when none does (the last 100 are read).
func (j *Jira) FindComment(ctx context.Context, key, marker string) (string, error) {
	var out struct {
		Comments []struct {
			ID   string          `json:"id"`
			Body json.RawMessage `json:"body"`
		} `json:"comments"`
	}
	if err := j.do(ctx, http.MethodGet, issuePath(key)+"?orderBy=-created&maxResults=100", nil, &out); err != nil {
		return "", err
	}
	for _, c := range out.Comments {
		if bytes.Contains(c.Body, []byte(marker)) {
			return j.link(key, c.ID), nil
		}
	}
	return "", nil
}
