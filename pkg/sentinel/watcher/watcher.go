// Package watcher is the contract between the sentinel and its watchers
// (SPEC §4.3): fetch → parse → emit → post_emit.
//
// A watcher's Fetch reads its source (GitHub, Jira, inbox/) and parses it
// into Items; the sentinel emits each item through the one admission door
// (queue.Admitter, SPEC §9.19) and hands the per-item Results back to
// PostEmit, which performs the watcher's side effects that must only follow a
// safe queueing (mark a thread read, delete an inbox file) and advances the
// watcher's state (ETag, last_check) only when every item was processed.
package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Watcher is one external source.
type Watcher interface {
	// Name is the polling key in sentinel.yaml (github, jira, inbox).
	Name() string
	// Interval is the current polling period (it may follow server hints
	// such as GitHub's X-Poll-Interval).
	Interval() time.Duration
	// Fetch reads the source and parses it (fetch → parse). A nil batch
	// means there is nothing to do this round (304, rate limited).
	Fetch(ctx context.Context) (*Batch, error)
	// PostEmit receives one Result per batch item, in order, after every
	// item was offered to the queue.
	PostEmit(ctx context.Context, b *Batch, res []Result) error
}

// Item is one parsed input.
type Item struct {
	// Event is the event to queue (unless Skip is set).
	Event doc.Event
	// Key is the watcher's own reference (thread id, issue key, file path).
	Key string
	// Skip, when set, says why this item is bad input: it is logged and not
	// queued.
	Skip string
}

// Batch is what one Fetch produced.
type Batch struct {
	Items []Item
	// State is private to the watcher (the new ETag, the check time, ...).
	State any
}

// Outcome is what happened to one item.
type Outcome int

// Outcomes of emitting an item.
const (
	// Admitted: newly queued in events/pending.
	Admitted Outcome = iota
	// Duplicate: already queued, dispatched or seen earlier.
	Duplicate
	// Skipped: bad input, not queued (Result.Reason says why).
	Skipped
	// Failed: a local error (disk) kept it from the queue; retry later.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Duplicate:
		return "duplicate"
	case Skipped:
		return "skipped"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Queued reports whether the item's event is safely in the queue (now or
// from an earlier round), so side effects that follow queueing may run.
func (o Outcome) Queued() bool { return o == Admitted || o == Duplicate }

// Result is the outcome of one item.
type Result struct {
	Outcome Outcome
	Reason  string // for Skipped and Failed
}

// Processed reports whether every result is final (nothing failed locally),
// which is when a watcher may advance its cursor.
func Processed(res []Result) bool {
	for _, r := range res {
		if r.Outcome == Failed {
			return false
		}
	}
	return true
}

// LoadState reads a watcher's state file at path into v: an empty path
// or a missing file leaves v alone and returns nil.
func LoadState(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// BaseURL parses a watcher's http(s) base URL; what names the config key in
// the error.
func BaseURL(raw, what string) (*url.URL, error) {
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s %q: want an http(s) URL", what, raw)
	}
	return base, nil
}

// HTTPClient returns a client (a copy of tmpl, if given) with a timeout on
// every call that never follows a redirect to another host, so a token sent
// to base never reaches anyone else.
func HTTPClient(base *url.URL, tmpl *http.Client, timeout time.Duration) *http.Client {
	c := &http.Client{}
	if tmpl != nil {
		cc := *tmpl
		c = &cc
	}
	c.Timeout = timeout
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || req.URL.Host != base.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return c
}
