// Package waits records why work is held: the king writes the record after
// every tick whose holds changed (one owner), and `start status`, `start
// tasks`/`start events`, the dashboard and `chamberlain --once` read it.
//
// The record is a value of the store's key-value (kv.NSWaits, kv.KeyKing):
// the files store keeps it in state/king/waits.json; PostgreSQL shares it,
// so an operator on any host reads what the leading king (on whichever
// host) wrote.
//
// Drive it with Write(ctx, s, rec) from the king and Read(ctx, s)
// everywhere else, s the role's kv.KV. A missing record reads as "nothing
// waits".
package waits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Reasons an event or task waits.
const (
	Health        = "health"         // the machine's health level refuses its priority
	Budget        = "budget"         // the daily budget's level refuses its priority
	TaskBudget    = "task_budget"    // today's spend plus its task budget would pass the day's budget
	Pause         = "pause"          // the operator paused admission (start pause)
	EnginePause   = "engine_pause"   // its engine hit a usage limit
	MaxSoldiers   = "max_soldiers"   // every soldier slot is taken
	MaxConcurrent = "max_concurrent" // its general runs as many as its manifest allows
	Backoff       = "backoff"        // a retry waits for its backoff
)

// Wait is one held event (EventID) or task (TaskID).
type Wait struct {
	EventID string `json:"event_id,omitempty"`
	TaskID  string `json:"task_id,omitempty"`
	Reason  string `json:"reason"`
	// Detail is one sentence for the operator, with the figure that holds
	// the work ("health orange (memory 91%) admits only high priority").
	Detail string    `json:"detail"`
	Since  time.Time `json:"since"`
	// Until is when the hold lifts by itself, when known.
	Until *time.Time `json:"until,omitempty"`
}

// Record is everything that waits, as of UpdatedAt.
type Record struct {
	UpdatedAt time.Time `json:"updated_at"`
	Waits     []Wait    `json:"waits"`
}

// maxRecord bounds what a reader loads.
const maxRecord = 8 << 20

// Path is the record's file in the files store: state/king/waits.json
// (where it keeps kv.NSWaits).
func Path(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleKing), "waits.json")
}

// Write replaces the record (in the files store atomically, 0600).
func Write(ctx context.Context, s kv.KV, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode waits: %w", err)
	}
	if err := s.Put(ctx, kv.NSWaits, kv.KeyKing, b); err != nil {
		return fmt.Errorf("write waits: %w", err)
	}
	return nil
}

// Read loads the record; a missing one is empty.
func Read(ctx context.Context, s kv.KV) (Record, error) {
	var r Record
	b, err := s.Get(ctx, kv.NSWaits, kv.KeyKing)
	if errors.Is(err, kv.ErrNotFound) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read waits: %w", err)
	}
	if len(b) > maxRecord {
		return r, fmt.Errorf("read waits: %d bytes, more than %d", len(b), maxRecord)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("read waits: %w", err)
	}
	return r, nil
}

// ByID indexes the record by event and task id.
func (r Record) ByID() map[string]Wait {
	m := make(map[string]Wait, len(r.Waits))
	for _, w := range r.Waits {
		if w.EventID != "" {
			m[w.EventID] = w
		}
		if w.TaskID != "" {
			m[w.TaskID] = w
		}
	}
	return m
}
