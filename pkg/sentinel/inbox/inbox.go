// Package inbox is the sentinel's inbox watcher (SPEC §4.3, §9.20): other
// tools drop `{id?, type, repo?, payload?, priority?}` JSON files into
// inbox/ (dot-temp, then rename). Each *.json file that is complete becomes
// an event (source inbox) under its given id, else
// evt-inbox-<basename>-<mtime unix>; it is deleted once queued (or found to
// be a duplicate). Invalid files move to inbox/rejected/ with a .reason.
//
// Complete means (SPEC §9.20 as changed): it arrived by rename
// (IN_MOVED_TO) or its writer closed it (IN_CLOSE_WRITE) — taken at once;
// a file opened for writing and not closed waits for its close (or
// StallAge unchanged); a file with no inotify history (present at start,
// after a queue overflow, no inotify) or an empty one is taken once its
// mtime is MinAge old, i.e. stable across that re-check.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// Name is the watcher's key under polling:.
const Name = "inbox"

// DefaultMinAge is how old a file must be before it is read (SPEC §9.20).
const DefaultMinAge = time.Second

// Config configures the watcher.
type Config struct {
	Dir         string // inbox/
	RejectedDir string // inbox/rejected/
	Interval    time.Duration
	MinAge      time.Duration // default DefaultMinAge
	StallAge    time.Duration // default DefaultStallAge
	MaxSize     int64         // default queue.DefaultMaxSize
	Clock       clock.Clock
	Log         *slog.Logger
	Events      *eventlog.Emitter // system.file_rejected
}

// Watcher reads inbox/.
type Watcher struct {
	cfg Config
	// nextReady is when the youngest waiting file becomes old enough (zero
	// when none waits).
	nextReady time.Time
	track     *tracker
}

// consume removes a file whose event is queued (or known).
func (w *Watcher) consume(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// New returns the watcher.
func New(cfg Config) *Watcher {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MinAge <= 0 {
		cfg.MinAge = DefaultMinAge
	}
	if cfg.StallAge <= 0 {
		cfg.StallAge = DefaultStallAge
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = queue.DefaultMaxSize
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	return &Watcher{cfg: cfg, track: newTracker()}
}

// Name implements watcher.Watcher.
func (w *Watcher) Name() string { return Name }

// Interval is the rescan period (inotify wakes the sentinel sooner).
func (w *Watcher) Interval() time.Duration { return w.cfg.Interval }

// EveryTick reports that the inbox is scanned on every sentinel tick: a
// tick woken by inotify on inbox/ must read it whatever the interval.
func (w *Watcher) EveryTick() bool { return true }

// NextReady returns when a file seen too young in the last Fetch becomes
// readable, or the zero time.
func (w *Watcher) NextReady() time.Time { return w.nextReady }

// reservedPrefixes are the event type prefixes only Kingdom's own watchers
// (the envoy for Slack, the sentinel's GitHub and Jira pollers, the king's
// schedules) may produce: an inbox file claiming one would speak for them
// (SPEC §10.15).
var reservedPrefixes = []string{"slack.", "github.", "jira.", "schedule."}

// ReservedPrefix returns the reserved prefix typ starts with (compared
// without case), or "".
func ReservedPrefix(typ string) string {
	low := strings.ToLower(strings.TrimSpace(typ))
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(low, p) {
			return p
		}
	}
	return ""
}

// Match reports whether a file name in inbox/ is an inbox event file.
func Match(name string) bool {
	return strings.HasSuffix(name, ".json") && !atomicfile.IsTemp(name)
}

// Fetch lists inbox/*.json and parses every file old enough.
func (w *Watcher) Fetch(context.Context) (*watcher.Batch, error) {
	now := w.cfg.Clock.Now()
	w.nextReady = time.Time{}
	ents, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read inbox: %w", err)
	}
	var items []watcher.Item
	for _, de := range ents {
		name := de.Name()
		if !Match(name) {
			continue
		}
		path := filepath.Join(w.cfg.Dir, name)
		fi, err := os.Lstat(path)
		if err != nil {
			continue // vanished: normal
		}
		if !fi.Mode().IsRegular() {
			// A directory named *.json is poison too: it would sit here
			// forever.
			reason := "not a regular file"
			if fi.IsDir() {
				reason += " (a directory)"
			}
			items = append(items, watcher.Item{Key: path, Skip: reason})
			continue
		}
		if ready := w.readyAt(name, fi); now.Before(ready) {
			// Possibly still being written by a producer that does not
			// rename into place: wait (SPEC §9.20). A writer's close wakes
			// the sentinel sooner.
			if w.nextReady.IsZero() || ready.Before(w.nextReady) {
				w.nextReady = ready
			}
			continue
		}
		if it, ok := w.parse(path, fi, now); ok {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	return &watcher.Batch{Items: items}, nil
}

// readyAt is when the file may be read (SPEC §9.20): at once when
// complete, else once its mtime is old enough.
func (w *Watcher) readyAt(name string, fi fs.FileInfo) time.Time {
	switch w.track.state(name) {
	case stateComplete:
		if fi.Size() > 0 {
			return time.Time{}
		}
	case stateWriting:
		return fi.ModTime().Add(w.cfg.StallAge)
	}
	return fi.ModTime().Add(w.cfg.MinAge)
}

// parse reads one file; ok is false when it vanished meanwhile (normal).
func (w *Watcher) parse(path string, fi fs.FileInfo, now time.Time) (it watcher.Item, ok bool) {
	data, err := queue.ReadLimited(path, w.cfg.MaxSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return watcher.Item{}, false
		}
		return watcher.Item{Key: path, Skip: err.Error()}, true
	}
	return w.decode(path, fi, data, now), true
}

func (w *Watcher) decode(path string, fi fs.FileInfo, data []byte, now time.Time) watcher.Item {
	in, err := schema.DecodeInboxEvent(data)
	if err != nil {
		return watcher.Item{Key: path, Skip: err.Error()}
	}
	if p := ReservedPrefix(in.Type); p != "" {
		return watcher.Item{Key: path, Skip: fmt.Sprintf("type %q: the %s prefix is reserved for events Kingdom's own watchers admit (SPEC §10.15)", in.Type, p)}
	}
	id := in.ID
	if id == "" {
		base := strings.TrimSuffix(filepath.Base(path), ".json")
		id = fmt.Sprintf("evt-inbox-%s-%d", base, fi.ModTime().Unix())
		if err := ids.Check(id); err != nil {
			return watcher.Item{Key: path, Skip: fmt.Sprintf("no id given and the file name does not make a valid one: %v", err)}
		}
	} else if err := ids.Check(id); err != nil {
		return watcher.Item{Key: path, Skip: err.Error()}
	}
	prio := in.Priority
	if prio == "" {
		prio = doc.PriorityNormal
	}
	payload := in.Payload
	if payload == nil {
		payload = map[string]any{}
	}
	return watcher.Item{Key: path, Event: doc.Event{
		ID:        id,
		Type:      in.Type,
		Source:    doc.SourceInbox,
		Repo:      in.Repo,
		Payload:   payload,
		Priority:  prio,
		CreatedAt: doc.FormatTime(now),
		Status:    doc.EventPending,
	}}
}

// PostEmit deletes queued and duplicate files and rejects bad ones; a file
// whose queueing failed stays for the next tick.
func (w *Watcher) PostEmit(_ context.Context, b *watcher.Batch, res []watcher.Result) error {
	var errs []error
	for i, it := range b.Items {
		if i >= len(res) {
			break
		}
		r := res[i]
		switch r.Outcome {
		case watcher.Admitted:
			if err := w.consume(it.Key); err != nil {
				errs = append(errs, fmt.Errorf("remove queued inbox file: %w", err))
			}
		case watcher.Duplicate:
			w.cfg.Log.Info("inbox: event already queued or seen, deleting the file", "file", filepath.Base(it.Key), "event_id", it.Event.ID)
			if err := w.consume(it.Key); err != nil {
				errs = append(errs, fmt.Errorf("remove duplicate inbox file: %w", err))
			}
		case watcher.Skipped:
			if err := queue.RejectPath(it.Key, w.cfg.RejectedDir, r.Reason, w.cfg.Events); err != nil {
				errs = append(errs, fmt.Errorf("reject inbox file %s: %w", filepath.Base(it.Key), err))
			}
		}
	}
	return errors.Join(errs...)
}
