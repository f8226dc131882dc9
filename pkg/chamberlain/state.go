package chamberlain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// AnomalyState is state/chamberlain/anomaly-state.json: what the event
// detectors remember across ticks (SPEC §4.8).
type AnomalyState struct {
	// Consecutive counts task.failed per actor since its last task.completed.
	Consecutive map[string]int `json:"consecutive_failures"`
	// Timeouts holds the times of soldier.timeout events within the last hour.
	Timeouts []time.Time `json:"timeouts"`
	// Detected maps an event id seen in event.detected to its time, until
	// event.dispatched or event.discarded (or the queue) shows it handled.
	Detected map[string]time.Time `json:"detected"`
	// StaleAlerted holds events already reported as stale (alert once).
	StaleAlerted map[string]time.Time `json:"stale_alerted"`
	// Unwritable maps a general that cannot write task results (a full
	// disk) to its last error, until it reports them writable again.
	Unwritable map[string]string `json:"results_unwritable,omitempty"`
}

// AlertState is state/chamberlain/alert-state.json: the alerts whose
// condition currently holds.
type AlertState struct {
	Active map[string]*ActiveAlert `json:"active"`
}

// ActiveAlert is one condition in a bad state.
type ActiveAlert struct {
	Kind     string    `json:"kind"`
	Key      string    `json:"key"`
	Since    time.Time `json:"since"`
	LastSent time.Time `json:"last_sent"`
	Sent     int       `json:"sent"`
	Content  string    `json:"content"`
	// ClearedAt is when the condition stopped holding; the recovered note
	// waits until it has stayed clear for RecoverAfter (a flap is absorbed).
	ClearedAt *time.Time `json:"cleared_at,omitempty"`
	// Recovered: the recovered note went out; the entry is kept for one
	// repeat window so a quick relapse does not alert again at once.
	Recovered bool `json:"recovered,omitempty"`
}

// MonitorState is state/chamberlain/state.json: everything else the
// chamberlain carries between ticks.
type MonitorState struct {
	// Levels is each metric's last level (green…red, or "warning" for disk),
	// so system.resource_warning fires when a threshold is crossed.
	Levels map[string]string `json:"levels"`
	// Roles tracks roles found dead, until they are seen alive again.
	Roles map[string]*RoleDown `json:"roles"`
	// Token is the last token evaluation (date is host local YYYY-MM-DD).
	Token TokenMemo `json:"token"`
	// Watchers holds the sentinel's watchers seen failing, until they
	// succeed again (system.watcher_failing / system.watcher_recovered).
	Watchers map[string]bool `json:"failing_watchers,omitempty"`
	// Report accumulates the daily report since its last issue.
	Report report.Acc `json:"report"`
}

// RoleDown is a role whose heartbeat went stale.
type RoleDown struct {
	Since     time.Time `json:"since"`
	LastSeen  time.Time `json:"last_seen"`
	KilledPID int       `json:"killed_pid,omitempty"` // pane pid of the hung session we killed
	SeenPID   int       `json:"seen_pid,omitempty"`   // pane pid when found dead
}

// TokenMemo is the last token evaluation.
type TokenMemo struct {
	Date    string  `json:"date"`
	Status  string  `json:"status"`
	CostUSD float64 `json:"daily_cost_usd"`
}

// statePath is state/chamberlain/state.json.
func statePath(l layout.Layout) string { return filepath.Join(l.ChamberlainDir(), "state.json") }

// dailyMarker is state/chamberlain/daily-<job>, holding the local date the
// job last ran.
func dailyMarker(l layout.Layout, job string) string {
	return filepath.Join(l.ChamberlainDir(), "daily-"+job)
}

// loadJSON reads path into v; a missing file leaves v as is. A corrupt file
// is reported so the caller can start over rather than crash-loop.
func loadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// saveJSON writes v to path (0600, write-then-rename) when its encoding
// differs from *last; it keeps the encoding written in *last.
func saveJSON(path string, v any, last *[]byte) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	b = append(b, '\n')
	if *last != nil && string(b) == string(*last) {
		return nil
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	*last = b
	return nil
}

func (a *AnomalyState) init() {
	if a.Consecutive == nil {
		a.Consecutive = map[string]int{}
	}
	if a.Detected == nil {
		a.Detected = map[string]time.Time{}
	}
	if a.StaleAlerted == nil {
		a.StaleAlerted = map[string]time.Time{}
	}
	if a.Unwritable == nil {
		a.Unwritable = map[string]string{}
	}
}

func (a *AlertState) init() {
	if a.Active == nil {
		a.Active = map[string]*ActiveAlert{}
	}
}

func (m *MonitorState) init(now time.Time) {
	if m.Levels == nil {
		m.Levels = map[string]string{}
	}
	if m.Roles == nil {
		m.Roles = map[string]*RoleDown{}
	}
	if m.Watchers == nil {
		m.Watchers = map[string]bool{}
	}
	m.Report.Init(now)
}
