// Package watchstatus is state/sentinel/watchers.json: how each of the
// sentinel's watchers fared at its last polls. A watcher whose fetch fails
// is retried at its next interval and never stops the others (SPEC §4.3),
// so a failure on every poll (a revoked token answering 401, a wrong Jira
// URL) shows nowhere else: the sentinel's tick still succeeds and its
// heartbeat stays fresh.
//
// The sentinel is the only writer: after each poll it calls
//
//	st.Record(w.Name(), fetchErr, now)
//	watchstatus.Save(watchstatus.Path(l), st)
//
// (only when Record reports a change), with every enabled watcher and no
// other. The chamberlain reads it with Load and raises an alert, an
// internal event and a degraded verdict once a watcher has failed
// FailingAfter polls in a row.
package watchstatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// FailingAfter is how many failed polls in a row make a watcher failing:
// one failure is a network blip retried at the next interval.
const FailingAfter = 3

// maxErrorLen bounds the error text kept per watcher.
const maxErrorLen = 500

// Watcher is one watcher's recent record.
type Watcher struct {
	// ConsecutiveFailures counts failed polls since the last success.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// LastError is the last failure's text, redacted and clipped.
	LastError     string `json:"last_error,omitempty"`
	LastFailureAt string `json:"last_failure_at,omitempty"`
	LastSuccessAt string `json:"last_success_at,omitempty"`
}

// Failing reports whether the watcher has failed FailingAfter polls in a row.
func (w Watcher) Failing() bool { return w.ConsecutiveFailures >= FailingAfter }

// File is the whole document.
type File struct {
	UpdatedAt string             `json:"updated_at"`
	Watchers  map[string]Watcher `json:"watchers"`
}

// Path is state/sentinel/watchers.json.
func Path(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleSentinel), "watchers.json")
}

// Record notes one poll of watcher name at now: err nil is a success. It
// reports whether the file changed in a way worth saving (a success after
// a success only moves LastSuccessAt, which is not saved every poll).
func (f *File) Record(name string, err error, now time.Time) bool {
	if f.Watchers == nil {
		f.Watchers = map[string]Watcher{}
	}
	w, known := f.Watchers[name]
	at := doc.FormatTime(now)
	if err == nil {
		changed := !known || w.ConsecutiveFailures > 0
		w.ConsecutiveFailures, w.LastSuccessAt = 0, at
		f.Watchers[name] = w
		if changed {
			f.UpdatedAt = at
		}
		return changed
	}
	w.ConsecutiveFailures++
	w.LastError = redact.Clip(redact.String(err.Error()), maxErrorLen)
	w.LastFailureAt = at
	f.Watchers[name] = w
	f.UpdatedAt = at
	return true
}

// Load reads the file at path; a missing file is an empty record.
func Load(path string) (File, error) {
	var f File
	b, err := queue.ReadLimited(path, queue.DefaultMaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read watcher status: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("decode watcher status %s: %w", path, err)
	}
	return f, nil
}

// Save writes the file (0600, write-then-rename).
func Save(path string, f File) error {
	if err := atomicfile.WriteJSON(path, f); err != nil {
		return fmt.Errorf("write watcher status: %w", err)
	}
	return nil
}
