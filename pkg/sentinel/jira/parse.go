package jira

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Issue is what the sentinel reads of one search hit.
type Issue struct {
	Key     string
	Summary string
	Status  string
	Updated time.Time
	// UpdatedRaw is the field as Jira sent it.
	UpdatedRaw string
	// Bad is set when the issue cannot become an event (and why).
	Bad string
}

// Page is one page of POST /rest/api/3/search/jql.
type Page struct {
	Issues        []Issue
	NextPageToken string
	IsLast        bool
}

type searchResponse struct {
	Issues        []json.RawMessage `json:"issues"`
	NextPageToken string            `json:"nextPageToken"`
	IsLast        *bool             `json:"isLast"`
}

type rawIssue struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Fields struct {
		Summary string `json:"summary"`
		Status  *struct {
			Name string `json:"name"`
		} `json:"status"`
		Updated string `json:"updated"`
	} `json:"fields"`
}

var keyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,49}-[0-9]{1,18}$`)

// Jira writes times like 2026-11-21T10:00:00.000+0000.
var timeLayouts = []string{
	"2006-01-02T15:04:05.000-0700",
	"2006-01-02T15:04:05-0700",
	time.RFC3339Nano,
}

// ParseTime reads a Jira timestamp.
func ParseTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad Jira time %q", clip(s, 40))
}

// ParseSearch parses one page of the enhanced JQL search. It fails when the
// body is not the expected JSON object; a bad issue is returned with Bad set.
func ParseSearch(data []byte) (*Page, error) {
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "<") {
		return nil, fmt.Errorf("parse jira search: got HTML, not JSON (%q…)", clip(s, 60))
	}
	var r searchResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("parse jira search: not the expected JSON object: %w", err)
	}
	if r.Issues == nil {
		return nil, errors.New("parse jira search: no \"issues\" array")
	}
	p := &Page{NextPageToken: r.NextPageToken}
	// isLast missing: the page is last when it carries no token.
	p.IsLast = r.NextPageToken == ""
	if r.IsLast != nil {
		p.IsLast = *r.IsLast || r.NextPageToken == ""
	}
	for i, raw := range r.Issues {
		var ri rawIssue
		if err := json.Unmarshal(raw, &ri); err != nil {
			p.Issues = append(p.Issues, Issue{Key: fmt.Sprintf("#%d", i), Bad: "issue is not an object of the expected shape: " + err.Error()})
			continue
		}
		is := Issue{Key: ri.Key, Summary: ri.Fields.Summary, UpdatedRaw: ri.Fields.Updated}
		if ri.Fields.Status != nil {
			is.Status = ri.Fields.Status.Name
		}
		switch {
		case !keyRE.MatchString(ri.Key):
			is.Bad = fmt.Sprintf("unsafe issue key %q", clip(ri.Key, 80))
		default:
			t, err := ParseTime(ri.Fields.Updated)
			if err != nil {
				is.Bad = fmt.Sprintf("issue %s: %v", ri.Key, err)
			}
			is.Updated = t
		}
		p.Issues = append(p.Issues, is)
	}
	return p, nil
}

// EventID is evt-jira-<KEY>-<updated as UTC digits YYYYMMDDHHMMSSmmm>
// (SPEC §3.2). Normalising to UTC keeps the id stable whatever zone the Jira
// user's profile shows; the milliseconds keep two updates within one second
// apart.
func EventID(key string, updated time.Time) string {
	return "evt-jira-" + key + "-" + strings.ReplaceAll(updated.UTC().Format("20060102150405.000"), ".", "")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
