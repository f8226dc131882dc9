// Package parks is the record of the breaker's parks (SPEC §12.4): a
// general whose failures look alike, or a source item (a PR, an issue, a
// Jira key, a Slack thread) re-triggered past its cap. The king alone
// writes them (package king, breaker.go); `start status`, the verdict, the
// dashboard and /metrics read them here, so no role imports the king.
//
// The records live in the store's key-value (kv.NSParks), one per park
// under Key(kind, name); the files store keeps them in
// state/store/kv/parks/. A park is sticky: it lasts until a passing canary
// (a general), the end of its window (an item) or an operator's
// `start unpark` lifts it.
//
//	ps, err := parks.List(ctx, kv.OnStore(st))
package parks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// Kinds of park.
const (
	General = "general"
	Item    = "item"
)

// WaitReason is the pkg/waits reason of an event held by a parked general.
const WaitReason = "parked"

// Park is one record of kv.NSParks.
type Park struct {
	Kind string `json:"kind"` // General | Item
	// Name is the general's name, or the item's key (ItemKey forms:
	// gh:<owner>:<repo>:<number>, jira:<KEY>, slack:<channel>:<thread_ts>).
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
	// Until is, for a general, when its canary may run; for an item, when
	// its window lets an attempt in again (the park lifts by itself).
	Until    time.Time `json:"until"`
	Reason   string    `json:"reason"` // one sentence with the figures
	Evidence Evidence  `json:"evidence"`
	// Canary is the task now probing a parked general (none while
	// Until is ahead); CanariesFailed counts the canaries that re-parked it.
	Canary         string `json:"canary_task_id,omitempty"`
	CanariesFailed int    `json:"canaries_failed,omitempty"`
	// Alerted: its one Slack alert is queued.
	Alerted bool `json:"alerted"`
}

// Evidence is what the park rests on: the count that reached the limit
// and the last attempts or failures behind it.
type Evidence struct {
	Count int `json:"count"`
	// Fingerprint is a general park's (general|status|reason class).
	Fingerprint string    `json:"fingerprint,omitempty"`
	Last        []Attempt `json:"last"`
}

// Attempt is one attempt behind a park: for a general a failure with its
// reason and a clipped, redacted error; for an item a dispatched attempt.
type Attempt struct {
	TaskID      string    `json:"task_id"`
	Attempt     int       `json:"attempt,omitempty"` // the task's retry_count
	At          time.Time `json:"at"`
	Status      string    `json:"status,omitempty"`
	ErrorReason string    `json:"error_reason,omitempty"`
	Error       string    `json:"error,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
}

// Key is the record key of the park of kind on name: "general:gen-pr",
// "item:gh:acme:web:12".
func Key(kind, name string) string { return kind + ":" + name }

// Target resolves what an operator names in `start unpark`: a record key,
// a general's name, or an item key (also "owner/repo#12").
func Target(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, General+":"), strings.HasPrefix(s, Item+":"):
	case ids.ValidGeneral(s):
		s = Key(General, s)
	default:
		if owner, rest, ok := strings.Cut(s, "/"); ok {
			if repo, num, ok := strings.Cut(rest, "#"); ok {
				s = "gh:" + owner + ":" + repo + ":" + num
			}
		}
		s = Key(Item, s)
	}
	if err := ids.Check(s); err != nil {
		return "", fmt.Errorf("park %w", err)
	}
	return s, nil
}

// List returns every park, generals first, then by name.
func List(ctx context.Context, s kv.KV) ([]Park, error) {
	m, err := s.List(ctx, kv.NSParks)
	if err != nil {
		return nil, fmt.Errorf("read parks: %w", err)
	}
	out := make([]Park, 0, len(m))
	for key, b := range m {
		var p Park
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("read park %s: %w", key, err)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == General
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// GeneralPark returns the park of general name, nil when it is not parked.
func GeneralPark(ctx context.Context, s kv.KV, name string) (*Park, error) {
	var p Park
	err := kv.GetJSON(ctx, s, kv.NSParks, Key(General, name), &p)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read park of %s: %w", name, err)
	}
	return &p, nil
}
