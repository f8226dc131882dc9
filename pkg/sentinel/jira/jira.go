// Package jira is the sentinel's Jira watcher (SPEC §4.3, §9.24): it runs
// POST {url}/rest/api/3/search/jql with
//
//	(scope.jql_base) AND updated >= "-<N>m" ORDER BY updated DESC
//
// where N is the minutes since the last successful check plus one (a
// relative window, so the Jira user's time zone cannot shift it; first run
// -10m), follows nextPageToken, and turns each hit into
// jira.ticket.assigned (first sight of the key) or jira.ticket.updated
// (with previous_status). State in state/sentinel/jira-state.json:
// last_check ("YYYY/MM/DD HH:mm", UTC) is advanced only after a fetch whose
// every issue was processed; known_issues maps KEY → last seen status.
package jira

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// Name is the watcher's key under polling:.
const Name = "jira"

// LastCheckLayout is how last_check is stored (UTC).
const LastCheckLayout = "2006/01/02 15:04"

const (
	// FirstWindowMinutes is the window of the first run.
	FirstWindowMinutes = 10
	pageSize           = 50
	maxPages           = 100
	maxBody            = 16 << 20
	// maxWindowMinutes caps the window after a long outage (30 days).
	maxWindowMinutes = 30 * 24 * 60
)

// Event types.
const (
	TypeAssigned = "jira.ticket.assigned"
	TypeUpdated  = "jira.ticket.updated"
)

// Config configures the watcher.
type Config struct {
	URL       string // Jira site, e.g. https://acme.atlassian.net
	JQLBase   string
	Interval  time.Duration
	Timeout   time.Duration
	Email     string // JIRA_USER_EMAIL
	Token     string // JIRA_API_TOKEN; never logged
	StatePath string // state/sentinel/jira-state.json
	Clock     clock.Clock
	Log       *slog.Logger
	Client    *http.Client
}

// State is jira-state.json.
type State struct {
	LastCheck   string            `json:"last_check,omitempty"`
	KnownIssues map[string]string `json:"known_issues"`
	// LastSeen is when each known issue last came through (RFC3339); an
	// issue quiet for KnownIssueTTL is forgotten, so the file does not grow
	// forever.
	LastSeen map[string]string `json:"last_seen,omitempty"`
}

// KnownIssueTTL is how long a known issue is remembered without an update.
// A ticket that comes back after that is reported as assigned again.
const KnownIssueTTL = 90 * 24 * time.Hour

// Watcher polls a Jira search.
type Watcher struct {
	cfg    Config
	client *http.Client
	base   *url.URL
	st     State
}

// New returns the watcher, loading its state (a corrupt file is logged and
// ignored: the first-run window applies and dedupe absorbs repeats).
func New(cfg Config) (*Watcher, error) {
	base, err := watcher.BaseURL(cfg.URL, "jira url (polling.jira.url or JIRA_URL)")
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 300 * time.Second
	}
	c := watcher.HTTPClient(base, cfg.Client, cfg.Timeout)
	w := &Watcher{cfg: cfg, client: c, base: base, st: State{KnownIssues: map[string]string{}}}
	if err := w.load(); err != nil {
		cfg.Log.Warn("jira state unreadable, starting fresh", "path", cfg.StatePath, "err", err)
	}
	return w, nil
}

// Name implements watcher.Watcher.
func (w *Watcher) Name() string { return Name }

// Interval is the polling period.
func (w *Watcher) Interval() time.Duration { return w.cfg.Interval }

// State returns a copy of the state.
func (w *Watcher) State() State {
	st := State{LastCheck: w.st.LastCheck, KnownIssues: map[string]string{}, LastSeen: map[string]string{}}
	for k, v := range w.st.KnownIssues {
		st.KnownIssues[k] = v
	}
	for k, v := range w.st.LastSeen {
		st.LastSeen[k] = v
	}
	return st
}

func (w *Watcher) load() error {
	var st State
	if err := watcher.LoadState(w.cfg.StatePath, &st); err != nil {
		return err
	}
	if st.KnownIssues == nil {
		st.KnownIssues = map[string]string{}
	}
	if st.LastSeen == nil {
		st.LastSeen = map[string]string{}
	}
	w.st = st
	return nil
}

func (w *Watcher) save() error {
	if w.cfg.StatePath == "" {
		return nil
	}
	if err := atomicfile.WriteJSON(w.cfg.StatePath, w.st); err != nil {
		return fmt.Errorf("save jira state: %w", err)
	}
	return nil
}

// WindowMinutes is N of `updated >= "-Nm"`: the minutes since last_check
// (rounded up) plus one, or FirstWindowMinutes without a valid last_check.
func WindowMinutes(lastCheck string, now time.Time) int {
	if lastCheck == "" {
		return FirstWindowMinutes
	}
	t, err := time.Parse(LastCheckLayout, lastCheck)
	if err != nil {
		return FirstWindowMinutes
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	n := int(math.Ceil(d.Minutes())) + 1
	if n > maxWindowMinutes {
		n = maxWindowMinutes
	}
	return n
}

// JQL builds the query for a window of n minutes.
func JQL(base string, n int) string {
	clause := fmt.Sprintf(`updated >= "-%dm" ORDER BY updated DESC`, n)
	if b := strings.TrimSpace(base); b != "" {
		return "(" + b + ") AND " + clause
	}
	return clause
}

type fetchState struct {
	started time.Time
}

// Fetch runs the search over every page.
func (w *Watcher) Fetch(ctx context.Context) (*watcher.Batch, error) {
	now := w.cfg.Clock.Now()
	jql := JQL(w.cfg.JQLBase, WindowMinutes(w.st.LastCheck, now))
	var issues []Issue
	seen := map[string]bool{}
	token := ""
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, fmt.Errorf("jira search: more than %d pages", maxPages)
		}
		p, err := w.search(ctx, jql, token)
		if err != nil {
			return nil, fmt.Errorf("jira search page %d: %w", page+1, err)
		}
		for _, is := range p.Issues {
			// ORDER BY updated DESC: the first hit of a key is its latest.
			if is.Bad == "" && seen[is.Key] {
				continue
			}
			seen[is.Key] = true
			issues = append(issues, is)
		}
		if p.IsLast {
			break
		}
		if p.NextPageToken == token {
			return nil, fmt.Errorf("jira search: nextPageToken repeats")
		}
		token = p.NextPageToken
	}
	items := make([]watcher.Item, 0, len(issues))
	for _, is := range issues {
		items = append(items, w.toItem(is, now))
	}
	return &watcher.Batch{Items: items, State: &fetchState{started: now}}, nil
}

func (w *Watcher) toItem(is Issue, now time.Time) watcher.Item {
	if is.Bad != "" {
		return watcher.Item{Key: is.Key, Skip: is.Bad}
	}
	id := EventID(is.Key, is.Updated)
	if err := ids.Check(id); err != nil {
		return watcher.Item{Key: is.Key, Skip: err.Error()}
	}
	typ, prio := TypeAssigned, doc.PriorityNormal
	var prev any
	if old, ok := w.st.KnownIssues[is.Key]; ok {
		typ, prio, prev = TypeUpdated, doc.PriorityLow, old
	}
	return watcher.Item{Key: is.Key, Event: doc.Event{
		ID:     id,
		Type:   typ,
		Source: doc.SourceJira,
		Payload: map[string]any{
			"ticket_key":      is.Key,
			"summary":         is.Summary,
			"status":          is.Status,
			"previous_status": prev,
			"url":             w.base.String() + "/browse/" + url.PathEscape(is.Key),
			"updated":         is.UpdatedRaw,
		},
		Priority:  prio,
		CreatedAt: doc.FormatTime(now),
		Status:    doc.EventPending,
	}}
}

// PostEmit records the statuses of the queued issues and advances
// last_check when every issue was processed.
func (w *Watcher) PostEmit(_ context.Context, b *watcher.Batch, res []watcher.Result) error {
	now := w.cfg.Clock.Now()
	if w.st.LastSeen == nil {
		w.st.LastSeen = map[string]string{}
	}
	for i, it := range b.Items {
		if i < len(res) && res[i].Outcome.Queued() {
			if st, ok := it.Event.Payload["status"].(string); ok {
				w.st.KnownIssues[it.Key] = st
				w.st.LastSeen[it.Key] = doc.FormatTime(now)
			}
		}
	}
	for k := range w.st.KnownIssues {
		seen, err := doc.ParseTime(w.st.LastSeen[k])
		if err != nil {
			// Known before last_seen existed: start its clock now.
			w.st.LastSeen[k] = doc.FormatTime(now)
			continue
		}
		if now.Sub(seen) > KnownIssueTTL {
			delete(w.st.KnownIssues, k)
			delete(w.st.LastSeen, k)
		}
	}
	if fs, ok := b.State.(*fetchState); ok && watcher.Processed(res) {
		w.st.LastCheck = fs.started.UTC().Format(LastCheckLayout)
	}
	return w.save()
}

type searchRequest struct {
	JQL           string   `json:"jql"`
	MaxResults    int      `json:"maxResults"`
	Fields        []string `json:"fields"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
}

func (w *Watcher) search(ctx context.Context, jql, token string) (*Page, error) {
	body, _ := json.Marshal(searchRequest{JQL: jql, MaxResults: pageSize,
		Fields: []string{"summary", "status", "updated"}, NextPageToken: token})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base.String()+"/rest/api/3/search/jql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "kingdom-sentinel")
	if w.cfg.Email != "" || w.cfg.Token != "" {
		req.SetBasicAuth(w.cfg.Email, w.cfg.Token)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return nil, fmt.Errorf("timeout after %s: %w", w.cfg.Timeout, ue.Err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(statusError(resp, data))
	}
	return ParseSearch(data)
}

func statusError(resp *http.Response, body []byte) string {
	msg := strings.TrimSpace(string(body))
	if strings.HasPrefix(msg, "<") || strings.Contains(resp.Header.Get("Content-Type"), "html") {
		msg = "an HTML page"
	} else {
		var e struct {
			ErrorMessages []string `json:"errorMessages"`
		}
		if json.Unmarshal(body, &e) == nil && len(e.ErrorMessages) > 0 {
			msg = strings.Join(e.ErrorMessages, "; ")
		}
		msg = strconv.Quote(clip(msg, 200))
	}
	hint := ""
	if resp.StatusCode == http.StatusUnauthorized {
		hint = " (check JIRA_USER_EMAIL and JIRA_API_TOKEN)"
	}
	return fmt.Sprintf("HTTP %d: %s%s", resp.StatusCode, msg, hint)
}
