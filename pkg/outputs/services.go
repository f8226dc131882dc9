// Package outputs carries out the side effects an agent asks for in its
// result (SPEC §12.3): the agent holds no write token, so a review, a
// comment, a push, a pull request or a Jira comment is an output the
// general checks against its manifest and performs once, with the write
// token, after the soldier exits.
//
// Each output is recorded in the store's key-value (namespace "outputs",
// key <task>-<attempt>-<index>) before it runs: pending, then started just
// before its call, then done{link}, refused{reason} or failed{error}. A
// general that finds a started record (it crashed after the call, or
// before recording its end) looks the output up where it went — a body
// carries the marker <!-- kingdom:<key> --> — before it calls again, so
// no crash, restart or retried attempt posts twice. A claim lost before
// the call stops the run: a fenced-out attempt's outputs never run.
//
//	svc := outputs.Load(layout, os.Getenv)
//	r := outputs.Runner{Store: st, Services: svc, Policy: m.Outputs, Target: tgt, Pusher: p, Held: held}
//	outcomes, err := r.Run(ctx, taskID, attempt, raw.Outputs) // err wraps store.ErrFenced when the claim went
package outputs

import (
	"net/http"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Services are where the writes (and the general's reads of a PR) go:
// the same GitHub API and Jira site as the sentinel's watchers, with the
// write token kingdom.env holds for the sentinel and the general.
type Services struct {
	GitHubAPI   string // e.g. https://api.github.com
	GitHubToken string // GH_TOKEN or GITHUB_TOKEN; "" goes unauthenticated (reads of public repositories)
	JiraURL     string // polling.jira.url or JIRA_URL; "" refuses jira.comment
	JiraEmail   string
	JiraToken   string
	// HTTP is the client (nil: one with Timeout).
	HTTP    *http.Client
	Timeout time.Duration // per request (default 30 s)
}

// Load reads the services the way the sentinel does: sentinel.yaml's
// polling.github.api_url (default https://api.github.com) and
// polling.jira.url (else JIRA_URL), the tokens from getenv. A missing or
// broken sentinel.yaml leaves the defaults.
func Load(l layout.Layout, getenv func(string) string) Services {
	s := Services{GitHubAPI: config.DefaultGitHubWatcher().APIURL}
	if c, err := config.LoadSentinel(l.ConfigFile(config.SentinelFile)); err == nil {
		if g := c.Polling.GitHub; g != nil && g.APIURL != "" {
			s.GitHubAPI = g.APIURL
		}
		if j := c.Polling.Jira; j != nil {
			s.JiraURL = j.URL
		}
	}
	for _, n := range []string{"GH_TOKEN", "GITHUB_TOKEN"} {
		if s.GitHubToken = getenv(n); s.GitHubToken != "" {
			break
		}
	}
	if s.JiraURL == "" {
		s.JiraURL = getenv("JIRA_URL")
	}
	s.JiraEmail, s.JiraToken = getenv("JIRA_USER_EMAIL"), getenv("JIRA_API_TOKEN")
	return s
}

func (s Services) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	t := s.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	return &http.Client{Timeout: t}
}
