// Package github is the sentinel's GitHub notifications watcher (SPEC §4.3,
// §9.29): GET {api_url}/notifications with If-None-Match (a 304 costs no
// rate limit), Link pagination, X-Poll-Interval, scope filters, event
// mapping, and PATCH /notifications/threads/{id} for exactly the threads
// whose events are safely queued. Rate limits (403/429 with
// X-RateLimit-Remaining: 0 + X-RateLimit-Reset, or Retry-After) stop every
// request until the reset, judged by the injected clock.
//
// State (ETag, Last-Modified, poll interval, rate-limit reset) lives in
// state/sentinel/github-state.json; the ETag advances only when every item of
// the response was processed and every mark-read succeeded, so a crash or an
// error between queueing and marking read repeats the poll, and the dedupe
// index absorbs the repeat.
package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// Name is the watcher's key under polling:.
const Name = "github"

const (
	perPage  = 50
	maxPages = 50
	maxBody  = 16 << 20
)

// Config configures the watcher.
type Config struct {
	APIURL    string        // e.g. https://api.github.com (no trailing slash needed)
	Interval  time.Duration // configured polling period
	Timeout   time.Duration // per HTTP request
	Filter    Filter
	Token     string // GH_TOKEN or GITHUB_TOKEN; never logged
	StatePath string // state/sentinel/github-state.json
	Clock     clock.Clock
	Log       *slog.Logger
	// Client overrides the HTTP client (its Timeout is still set).
	Client *http.Client
}

// State is github-state.json.
type State struct {
	ETag                string `json:"etag,omitempty"`
	LastModified        string `json:"last_modified,omitempty"`
	PollIntervalSeconds int    `json:"poll_interval_seconds,omitempty"`
	// RateLimitedUntil is RFC 3339; no request is made before it.
	RateLimitedUntil string `json:"rate_limited_until,omitempty"`
}

// Watcher polls GitHub notifications.
type Watcher struct {
	cfg    Config
	client *http.Client
	base   *url.URL
	st     State
	until  time.Time // rate limited until
	// limitLogged: the current rate-limit window was logged already.
	limitLogged bool
	// saved is the state last written (a 304 round rewrites nothing).
	saved State
}

// New returns the watcher, loading its state file (a corrupt one is logged
// and ignored: the worst case is one repeated poll, absorbed by dedupe).
func New(cfg Config) (*Watcher, error) {
	base, err := watcher.BaseURL(cfg.APIURL, "github api_url")
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
		cfg.Interval = 60 * time.Second
	}
	c := watcher.HTTPClient(base, cfg.Client, cfg.Timeout)
	w := &Watcher{cfg: cfg, client: c, base: base}
	if err := w.load(); err != nil {
		cfg.Log.Warn("github state unreadable, starting without ETag", "path", cfg.StatePath, "err", err)
	}
	return w, nil
}

// Name implements watcher.Watcher.
func (w *Watcher) Name() string { return Name }

// Interval is the configured interval, or GitHub's X-Poll-Interval when
// that is longer.
func (w *Watcher) Interval() time.Duration {
	if p := time.Duration(w.st.PollIntervalSeconds) * time.Second; p > w.cfg.Interval {
		return p
	}
	return w.cfg.Interval
}

// State returns a copy of the current state (tests, status).
func (w *Watcher) State() State { return w.st }

// RateLimitedUntil returns the reset time while rate limited.
func (w *Watcher) RateLimitedUntil() time.Time { return w.until }

func (w *Watcher) load() error {
	var st State
	if err := watcher.LoadState(w.cfg.StatePath, &st); err != nil {
		return err
	}
	w.st, w.saved = st, st
	if st.RateLimitedUntil != "" {
		if t, err := time.Parse(time.RFC3339, st.RateLimitedUntil); err == nil {
			w.until = t
		}
	}
	return nil
}

func (w *Watcher) save() error {
	if w.cfg.StatePath == "" {
		return nil
	}
	w.st.RateLimitedUntil = ""
	if !w.until.IsZero() {
		w.st.RateLimitedUntil = w.until.UTC().Format(time.RFC3339)
	}
	if w.st == w.saved {
		if _, err := os.Stat(w.cfg.StatePath); err == nil {
			return nil
		}
	}
	if err := atomicfile.WriteJSON(w.cfg.StatePath, w.st); err != nil {
		return fmt.Errorf("save github state: %w", err)
	}
	w.saved = w.st
	return nil
}

// fetchState is the batch's private state.
type fetchState struct {
	etag, lastModified string
}

// ErrRateLimited is wrapped by errors of requests refused for rate limits.
var ErrRateLimited = errors.New("github rate limit")

// limited reports whether requests must wait, logging the first refusal of
// a window only.
func (w *Watcher) limited() bool {
	now := w.cfg.Clock.Now()
	if w.until.IsZero() || !now.Before(w.until) {
		if !w.until.IsZero() {
			w.cfg.Log.Info("github rate limit window over, polling again")
			w.until = time.Time{}
			w.limitLogged = false
			_ = w.save()
		}
		return false
	}
	return true
}

// Fetch polls the notifications (all pages).
func (w *Watcher) Fetch(ctx context.Context) (*watcher.Batch, error) {
	if w.limited() {
		w.cfg.Log.Debug("github rate limited, skipping poll", "until", w.until.UTC().Format(time.RFC3339))
		return nil, nil
	}
	now := w.cfg.Clock.Now()
	next := w.base.String() + "/notifications?per_page=" + strconv.Itoa(perPage)
	fst := &fetchState{}
	var items []watcher.Item
	filtered := 0
	for page := 0; next != ""; page++ {
		if page >= maxPages {
			return nil, fmt.Errorf("github notifications: more than %d pages", maxPages)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, fmt.Errorf("github notifications: %w", err)
		}
		w.headers(req)
		if page == 0 {
			if w.st.ETag != "" {
				req.Header.Set("If-None-Match", w.st.ETag)
			}
			if w.st.LastModified != "" {
				req.Header.Set("If-Modified-Since", w.st.LastModified)
			}
		}
		resp, body, err := w.do(req)
		if errors.Is(err, ErrRateLimited) {
			return nil, nil // logged once by do; nothing is emitted this round
		}
		if err != nil {
			return nil, fmt.Errorf("github notifications: %w", err)
		}
		if page == 0 {
			w.pollInterval(resp)
		}
		switch {
		case page == 0 && resp.StatusCode == http.StatusNotModified:
			w.cfg.Log.Debug("github: no new notifications (304)")
			return nil, w.save()
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("github notifications: %s", statusError(resp, body))
		}
		pageItems, nf, err := ParseNotifications(body, w.cfg.Filter, now)
		if err != nil {
			return nil, fmt.Errorf("github notifications page %d: %w", page+1, err)
		}
		items = append(items, pageItems...)
		filtered += nf
		if page == 0 {
			fst.etag = resp.Header.Get("ETag")
			fst.lastModified = resp.Header.Get("Last-Modified")
		}
		next, err = w.nextLink(resp.Header.Get("Link"))
		if err != nil {
			return nil, fmt.Errorf("github notifications: %w", err)
		}
	}
	if filtered > 0 {
		w.cfg.Log.Debug("github: notifications outside scope left unread", "count", filtered)
	}
	return &watcher.Batch{Items: items, State: fst}, nil
}

// PostEmit marks the queued threads read, then advances the ETag when every
// item was processed and every thread was marked.
func (w *Watcher) PostEmit(ctx context.Context, b *watcher.Batch, res []watcher.Result) error {
	fst, _ := b.State.(*fetchState)
	allMarked := true
	for i, it := range b.Items {
		if i >= len(res) || !res[i].Outcome.Queued() {
			continue
		}
		if w.limited() {
			allMarked = false
			break
		}
		if err := w.markRead(ctx, it.Key); err != nil {
			allMarked = false
			w.cfg.Log.Warn("github: mark thread read failed; retried next poll", "thread", it.Key, "event_id", it.Event.ID, "err", err)
		}
	}
	if fst != nil && allMarked && watcher.Processed(res) {
		w.st.ETag, w.st.LastModified = fst.etag, fst.lastModified
	}
	return w.save()
}

func (w *Watcher) markRead(ctx context.Context, thread string) error {
	if !threadIDRE.MatchString(thread) {
		return fmt.Errorf("unsafe thread id %q", thread)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, w.base.String()+"/notifications/threads/"+url.PathEscape(thread), nil)
	if err != nil {
		return err
	}
	w.headers(req)
	resp, body, err := w.do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotModified {
		return errors.New(statusError(resp, body))
	}
	return nil
}

func (w *Watcher) headers(req *http.Request) {
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "kingdom-sentinel")
	if w.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.cfg.Token)
	}
}

// do sends req and reads the body; rate-limit answers set the window and
// come back as an error wrapping ErrRateLimited.
func (w *Watcher) do(req *http.Request) (*http.Response, []byte, error) {
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, nil, stripURLError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, fmt.Errorf("read response: %w", err)
	}
	if until, ok := w.rateLimit(resp); ok {
		w.until = until
		if !w.limitLogged {
			w.limitLogged = true
			w.cfg.Log.Warn("github rate limited: no requests until the reset",
				"status", resp.StatusCode, "until", until.UTC().Format(time.RFC3339))
		}
		_ = w.save()
		return nil, nil, fmt.Errorf("%w until %s", ErrRateLimited, until.UTC().Format(time.RFC3339))
	}
	// A successful answer that used the last request of the window: wait for
	// the reset instead of earning a 403.
	if resp.StatusCode/100 == 2 && resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			w.until = time.Unix(reset, 0)
		}
	}
	return resp, body, nil
}

// rateLimit reads a rate-limit refusal: 403/429 with X-RateLimit-Remaining:
// 0 and X-RateLimit-Reset (epoch seconds), or with Retry-After (seconds or an
// HTTP date).
func (w *Watcher) rateLimit(resp *http.Response) (time.Time, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return time.Time{}, false
	}
	now := w.cfg.Clock.Now()
	if ra := strings.TrimSpace(resp.Header.Get("Retry-After")); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			return now.Add(time.Duration(s) * time.Second), true
		}
		if t, err := http.ParseTime(ra); err == nil {
			return t, true
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return time.Unix(reset, 0), true
		}
		// Remaining 0 without a reset: GitHub's windows are an hour.
		return now.Add(time.Hour), true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return now.Add(time.Minute), true
	}
	return time.Time{}, false
}

func (w *Watcher) pollInterval(resp *http.Response) {
	if s, err := strconv.Atoi(resp.Header.Get("X-Poll-Interval")); err == nil && s > 0 && s <= 3600 {
		w.st.PollIntervalSeconds = s
	}
}

var linkRE = regexp.MustCompile(`<([^>]*)>\s*;\s*rel="?([^",;]+)"?`)

// nextLink returns the rel="next" URL of a Link header, refusing one on
// another host (our token must not leave the API host).
func (w *Watcher) nextLink(h string) (string, error) {
	for _, part := range strings.Split(h, ",") {
		m := linkRE.FindStringSubmatch(part)
		if m == nil {
			continue
		}
		rels := strings.Fields(m[2])
		isNext := false
		for _, r := range rels {
			if r == "next" {
				isNext = true
			}
		}
		if !isNext {
			continue
		}
		u, err := w.base.Parse(m[1])
		if err != nil {
			return "", fmt.Errorf("bad Link next %q: %w", clip(m[1], 100), err)
		}
		if u.Host != w.base.Host || u.Scheme != w.base.Scheme {
			return "", fmt.Errorf("Link next points to another host %q", u.Host)
		}
		return u.String(), nil
	}
	return "", nil
}

// statusError describes an unexpected HTTP answer without echoing much of
// the body (an HTML page is named as such).
func statusError(resp *http.Response, body []byte) string {
	msg := strings.TrimSpace(string(body))
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(msg, "<") || strings.Contains(ct, "html"):
		msg = "an HTML page"
	default:
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		msg = strconv.Quote(clip(msg, 200))
	}
	hint := ""
	if resp.StatusCode == http.StatusUnauthorized {
		hint = " (check GH_TOKEN or GITHUB_TOKEN)"
	}
	return fmt.Sprintf("HTTP %d: %s%s", resp.StatusCode, msg, hint)
}

// stripURLError keeps the operation and cause of a transport error; the
// URL carries no secret, but a short message reads better in logs.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("%s %s: timeout: %w", ue.Op, ue.URL, ue.Err)
		}
		return fmt.Errorf("%s %s: %w", ue.Op, ue.URL, ue.Err)
	}
	return err
}
