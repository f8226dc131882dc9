package github

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// Notification is the part of a GitHub notification thread the sentinel
// reads (GET /notifications).
type Notification struct {
	ID         string `json:"id"`
	Reason     string `json:"reason"`
	Unread     bool   `json:"unread"`
	UpdatedAt  string `json:"updated_at"`
	URL        string `json:"url"`
	Repository struct {
		FullName string `json:"full_name"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Subject struct {
		Title string `json:"title"`
		URL   string `json:"url"`
		Type  string `json:"type"`
	} `json:"subject"`
}

// Filter is the scope of sentinel.yaml's polling.github.scope.
type Filter struct {
	Repos   []string // owner/name, compared case-insensitively; empty = all
	Reasons []string // notification reasons; empty = all
}

// Allows reports whether a notification is in scope.
func (f Filter) Allows(n *Notification) bool {
	if len(f.Repos) > 0 && !slices.ContainsFunc(f.Repos, func(r string) bool {
		return strings.EqualFold(r, n.Repository.FullName)
	}) {
		return false
	}
	if len(f.Reasons) > 0 && !slices.Contains(f.Reasons, n.Reason) {
		return false
	}
	return true
}

// Event types' reason words (SPEC §9.29).
func reasonWord(reason string) string {
	switch reason {
	case "assign":
		return "assigned"
	case "mention", "team_mention":
		return "mentioned"
	}
	return reason
}

var wordRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Classify maps a subject type and a notification reason to the event type
// and priority (SPEC §4.3, §9.29): PullRequest → github.pr.<r>, Issue →
// github.issue.<r>, anything else → github.notification.<reason>; priority
// normal for review_requested/assigned/mentioned on PRs and assigned on
// issues, low otherwise. A reason that is not a plain lower-case word maps to
// "other".
func Classify(subjectType, reason string) (eventType, priority string) {
	raw := reason
	if !wordRE.MatchString(raw) {
		raw = "other"
	}
	word := reasonWord(raw)
	priority = doc.PriorityLow
	switch subjectType {
	case "PullRequest":
		eventType = "github.pr." + word
		switch word {
		case "review_requested", "assigned", "mentioned":
			priority = doc.PriorityNormal
		}
	case "Issue":
		eventType = "github.issue." + word
		if word == "assigned" {
			priority = doc.PriorityNormal
		}
	default:
		eventType = "github.notification." + raw
	}
	return eventType, priority
}

var (
	threadIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	pullRE     = regexp.MustCompile(`/pulls/([0-9]{1,18})/?$`)
	issueRE    = regexp.MustCompile(`/issues/([0-9]{1,18})/?$`)
	repoRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$`)
)

// PRNumber extracts the pull request number from a subject URL
// (…/repos/o/r/pulls/123), or "".
func PRNumber(subjectURL string) string {
	if m := pullRE.FindStringSubmatch(subjectURL); m != nil {
		return m[1]
	}
	return ""
}

// EventID is evt-github-<thread id>-<updated_at as UTC digits, YYYYMMDDHHMMSS>
// (SPEC §3.2; the colons and dashes of the timestamp are dropped so the id is
// a plain file name).
func EventID(threadID string, updated time.Time) string {
	return "evt-github-" + threadID + "-" + updated.UTC().Format("20060102150405")
}

// ParseNotifications parses one page of GET /notifications. It fails only
// when the body is not a JSON array; a bad element becomes an Item with Skip
// set. Notifications outside the filter are left out (and counted).
func ParseNotifications(data []byte, f Filter, now time.Time) (items []watcher.Item, filtered int, err error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, 0, fmt.Errorf("parse notifications: %w", describeJSONError(data, err))
	}
	for i, r := range raw {
		var n Notification
		if err := json.Unmarshal(r, &n); err != nil {
			items = append(items, watcher.Item{Key: fmt.Sprintf("#%d", i), Skip: "notification is not an object of the expected shape: " + err.Error()})
			continue
		}
		it, ok := toItem(&n, f, now)
		if !ok {
			filtered++
			continue
		}
		items = append(items, it)
	}
	return items, filtered, nil
}

func toItem(n *Notification, f Filter, now time.Time) (watcher.Item, bool) {
	if !threadIDRE.MatchString(n.ID) {
		return watcher.Item{Key: n.ID, Skip: fmt.Sprintf("unsafe notification id %q (want 1-64 of A-Z a-z 0-9 _ -)", clip(n.ID, 80))}, true
	}
	if !f.Allows(n) {
		return watcher.Item{}, false
	}
	updated, err := time.Parse(time.RFC3339, n.UpdatedAt)
	if err != nil {
		return watcher.Item{Key: n.ID, Skip: fmt.Sprintf("notification %s: bad updated_at %q", n.ID, clip(n.UpdatedAt, 40))}, true
	}
	id := EventID(n.ID, updated)
	if err := ids.Check(id); err != nil {
		return watcher.Item{Key: n.ID, Skip: err.Error()}, true
	}
	typ, prio := Classify(n.Subject.Type, n.Reason)
	var repo *string
	if repoRE.MatchString(n.Repository.FullName) && len(n.Repository.FullName) <= 200 {
		r := n.Repository.FullName
		repo = &r
	}
	payload := map[string]any{
		"thread_id":     n.ID,
		"reason":        n.Reason,
		"subject_title": n.Subject.Title,
		"subject_url":   n.Subject.URL,
		"subject_type":  n.Subject.Type,
		"updated_at":    n.UpdatedAt,
		"pr_number":     nil,
	}
	if pr := PRNumber(n.Subject.URL); pr != "" {
		payload["pr_number"] = pr
	}
	if m := issueRE.FindStringSubmatch(n.Subject.URL); m != nil {
		payload["issue_number"] = m[1]
	}
	if n.Repository.HTMLURL != "" {
		payload["repo_url"] = n.Repository.HTMLURL
	}
	return watcher.Item{Key: n.ID, Event: doc.Event{
		ID:        id,
		Type:      typ,
		Source:    doc.SourceGitHub,
		Repo:      repo,
		Payload:   payload,
		Priority:  prio,
		CreatedAt: doc.FormatTime(now),
		Status:    doc.EventPending,
	}}, true
}

// describeJSONError names the likely cause of a body that is not JSON (an
// HTML error page from a proxy is the usual one).
func describeJSONError(data []byte, err error) error {
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "<") {
		return fmt.Errorf("got HTML, not JSON (%q…)", clip(s, 60))
	}
	if s == "" {
		return fmt.Errorf("empty body")
	}
	return fmt.Errorf("not JSON: %w", err)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
