// Package enginepause is the engines paused by a usage limit and until
// when (SPEC §10.8): one document, kv.NSPauses/kv.KeyEngines (the files
// store keeps it in state/king/engine-pause.json). The king writes it when a
// result says UsageLimited; the king's admission, the generals (which hold
// back their pending tasks of a paused engine), the chamberlain and
// `start status` read it.
//
//	p, err := enginepause.Load(ctx, kv.OnStore(st))
//	if until, ok := p.Active(engine, now); ok { /* wait until `until` */ }
package enginepause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// Pause is one engine's pause.
type Pause struct {
	Until  string `json:"until"` // RFC 3339 UTC
	Reason string `json:"reason"`
	// Since is when the pause began; the task that hit the limit is Task.
	Since string `json:"since,omitempty"`
	Task  string `json:"task_id,omitempty"`
}

// UntilTime parses Until; zero when it does not parse.
func (p Pause) UntilTime() time.Time {
	t, err := doc.ParseTime(p.Until)
	if err != nil {
		return time.Time{}
	}
	return t
}

// File is the whole document: engine → pause.
type File map[string]Pause

// MaxPause caps every pause: the engines' longest limit window is seven
// days, so a reset further ahead is a misread (an engine's text, a result
// file's resets_at, a hand edit) and must not hold an engine for months.
const MaxPause = 8 * 24 * time.Hour

// Clamp bounds a reset named at now to MaxPause after now.
func Clamp(until, now time.Time) time.Time {
	if limit := now.Add(MaxPause); until.After(limit) {
		return limit
	}
	return until
}

// maxFile bounds the read; the document holds one entry per engine.
const maxFile = 1 << 20

// Load reads the pauses; none recorded means no pause. A corrupt document
// is reported with an empty result (nothing is paused by garbage). A pause
// longer than MaxPause from its start (written before the cap, or by hand)
// is read as ending at the cap, so every reader lifts it at the same time.
func Load(ctx context.Context, s kv.KV) (File, error) {
	f := File{}
	b, err := s.Get(ctx, kv.NSPauses, kv.KeyEngines)
	if errors.Is(err, kv.ErrNotFound) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read engine pauses: %w", err)
	}
	if len(b) > maxFile {
		return f, fmt.Errorf("read engine pauses: %d bytes, over the limit", len(b))
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("decode engine pauses: %w", err)
	}
	if f == nil {
		f = File{}
	}
	for eng, p := range f {
		since, err := doc.ParseTime(p.Since)
		if err != nil {
			continue
		}
		if u := p.UntilTime(); !u.IsZero() && u.After(since.Add(MaxPause)) {
			p.Until = doc.FormatTime(since.Add(MaxPause))
			f[eng] = p
		}
	}
	return f, nil
}

// Save writes the pauses (in file mode 0600, write-then-rename).
func Save(ctx context.Context, s kv.KV, f File) error {
	if err := kv.PutJSON(ctx, s, kv.NSPauses, kv.KeyEngines, f); err != nil {
		return fmt.Errorf("write engine pauses: %w", err)
	}
	return nil
}

// Active reports whether engine is paused at now, and until when.
func (f File) Active(engine string, now time.Time) (time.Time, bool) {
	p, ok := f[engine]
	if !ok {
		return time.Time{}, false
	}
	u := p.UntilTime()
	return u, u.After(now)
}

// Engines lists the engines in the file, sorted.
func (f File) Engines() []string {
	out := make([]string, 0, len(f))
	for e := range f {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}
