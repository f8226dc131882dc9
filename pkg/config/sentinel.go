package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Sentinel is sentinel.yaml: which external watchers run and how.
type Sentinel struct {
	Polling Polling `yaml:"polling"`
}

// Polling holds one section per watcher. A watcher runs when its key is
// present in the file (an empty value enables it with defaults); a nil
// section means disabled. When sentinel.yaml or its polling key is absent,
// only the inbox watcher runs.
type Polling struct {
	GitHub *GitHubWatcher `yaml:"github"`
	Jira   *JiraWatcher   `yaml:"jira"`
	Inbox  *InboxWatcher  `yaml:"inbox"`
}

// GitHubWatcher polls GitHub notifications.
type GitHubWatcher struct {
	IntervalSeconds int         `yaml:"interval_seconds" check:"min=1,max=86400"`
	APIURL          string      `yaml:"api_url" check:"nonempty"`
	TimeoutSeconds  int         `yaml:"timeout_seconds" check:"min=1,max=3600"`
	Scope           GitHubScope `yaml:"scope"`
}

// GitHubScope filters notifications.
type GitHubScope struct {
	Repos         []string `yaml:"repos"`          // owner/name; empty = all
	FilterReasons []string `yaml:"filter_reasons"` // notification reasons; empty = all
}

// JiraWatcher polls a Jira JQL search.
type JiraWatcher struct {
	IntervalSeconds int       `yaml:"interval_seconds" check:"min=1,max=86400"`
	URL             string    `yaml:"url"`
	TimeoutSeconds  int       `yaml:"timeout_seconds" check:"min=1,max=3600"`
	Scope           JiraScope `yaml:"scope"`
}

// JiraScope narrows the search.
type JiraScope struct {
	JQLBase string `yaml:"jql_base"` // ANDed with the updated-since clause
}

// InboxWatcher reads inbox/*.json.
type InboxWatcher struct {
	IntervalSeconds int `yaml:"interval_seconds" check:"min=1,max=86400"`
}

// Enabled reports whether the watcher runs (its section is present).
func (w *GitHubWatcher) Enabled() bool { return w != nil }

// Enabled reports whether the watcher runs (its section is present).
func (w *JiraWatcher) Enabled() bool { return w != nil }

// Enabled reports whether the watcher runs (its section is present).
func (w *InboxWatcher) Enabled() bool { return w != nil }

// Interval is the polling period.
func (w *GitHubWatcher) Interval() time.Duration { return seconds(w.IntervalSeconds) }

// Timeout bounds one HTTP request.
func (w *GitHubWatcher) Timeout() time.Duration { return seconds(w.TimeoutSeconds) }

// Interval is the polling period.
func (w *JiraWatcher) Interval() time.Duration { return seconds(w.IntervalSeconds) }

// Timeout bounds one HTTP request.
func (w *JiraWatcher) Timeout() time.Duration { return seconds(w.TimeoutSeconds) }

// Interval is the polling period (inotify wakes the sentinel sooner).
func (w *InboxWatcher) Interval() time.Duration { return seconds(w.IntervalSeconds) }

// Names lists the enabled watchers, in the order github, jira, inbox.
func (p *Polling) Names() []string {
	var names []string
	if p.GitHub.Enabled() {
		names = append(names, "github")
	}
	if p.Jira.Enabled() {
		names = append(names, "jira")
	}
	if p.Inbox.Enabled() {
		names = append(names, "inbox")
	}
	return names
}

// DefaultGitHubWatcher returns the defaults of a present polling.github.
func DefaultGitHubWatcher() *GitHubWatcher {
	return &GitHubWatcher{
		IntervalSeconds: 60,
		APIURL:          "https://api.github.com",
		TimeoutSeconds:  30,
		Scope:           GitHubScope{Repos: []string{}, FilterReasons: []string{}},
	}
}

// DefaultJiraWatcher returns the defaults of a present polling.jira.
func DefaultJiraWatcher() *JiraWatcher {
	return &JiraWatcher{IntervalSeconds: 300, TimeoutSeconds: 30}
}

// DefaultInboxWatcher returns the defaults of a present polling.inbox.
func DefaultInboxWatcher() *InboxWatcher {
	return &InboxWatcher{IntervalSeconds: 10}
}

// DefaultSentinel returns sentinel.yaml's defaults: the inbox watcher only.
func DefaultSentinel() *Sentinel {
	return &Sentinel{Polling: Polling{Inbox: DefaultInboxWatcher()}}
}

// UnmarshalYAML enables exactly the watchers whose keys are present, each
// starting from its defaults, so that `inbox:` with no value enables it.
func (p *Polling) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("polling: expected a mapping")
	}
	*p = Polling{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		var dst any
		switch key {
		case "github":
			p.GitHub = DefaultGitHubWatcher()
			dst = p.GitHub
		case "jira":
			p.Jira = DefaultJiraWatcher()
			dst = p.Jira
		case "inbox":
			p.Inbox = DefaultInboxWatcher()
			dst = p.Inbox
		default:
			return fmt.Errorf("polling.%s: unknown key (known: github, jira, inbox)", key)
		}
		if isNull(resolveAlias(val)) {
			continue
		}
		if err := val.Decode(dst); err != nil {
			return fmt.Errorf("polling.%s: %w", key, err)
		}
	}
	return nil
}

// LoadSentinel loads sentinel.yaml; a missing file means defaults.
func LoadSentinel(path string) (*Sentinel, error) {
	c := DefaultSentinel()
	src, err := loadFile(path, c, true)
	switch {
	case err == errMissing:
		src = &source{file: path}
	case err != nil:
		return nil, err
	}
	// "polling:" with nothing under it lists no watcher: none run. (yaml
	// leaves the defaults in place for a null value.)
	if n := lookup(src.doc, "polling"); n != nil && isNull(n) {
		c.Polling = Polling{}
	}
	if err := c.Validate(); err != nil {
		return nil, src.locate(err)
	}
	return c, nil
}

// Validate checks every key of s.
func (s *Sentinel) Validate() error {
	var p problems
	checkRules(reflect.ValueOf(s), "", &p)
	if g := s.Polling.GitHub; g != nil {
		if g.APIURL != "" && !validURL(g.APIURL) {
			p.add("polling.github.api_url", "expected an http(s) URL, got %q", g.APIURL)
		}
		for i, r := range g.Scope.Repos {
			if !repoRE.MatchString(r) {
				p.add(fmt.Sprintf("polling.github.scope.repos[%d]", i), "expected owner/name, got %q", r)
			}
		}
		for i, r := range g.Scope.FilterReasons {
			if strings.TrimSpace(r) == "" {
				p.add(fmt.Sprintf("polling.github.scope.filter_reasons[%d]", i), "expected a notification reason, got %q", r)
			}
		}
	}
	if j := s.Polling.Jira; j != nil && !validURL(j.URL) {
		p.add("polling.jira.url", "expected the Jira site's http(s) URL (required when polling.jira is present), got %q", j.URL)
	}
	return p.err()
}
