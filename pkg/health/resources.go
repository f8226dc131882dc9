package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// StaleAfter is how old resources.json may be before its health no longer
// counts: the chamberlain writes it every 30 s, so an older file means the
// chamberlain is down (seed 000: the king then assumes orange).
const StaleAfter = 120 * time.Second

// Resources is state/resources.json, exactly seed 000's shape.
type Resources struct {
	// Timestamp is when the chamberlain measured (doc.FormatTime).
	Timestamp string       `json:"timestamp"`
	System    SystemStats  `json:"system"`
	Sessions  SessionStats `json:"sessions"`
	Health    string       `json:"health"`
	// Tokens is nil when token monitoring is off; readers then see unknown.
	Tokens *Tokens `json:"tokens,omitempty"`
	// Budget is today's spend against king.yaml's budget and EnginePauses
	// the engines paused by a usage limit (SPEC §10.7, §10.8). Both are for
	// people and dashboards; admission reads the king's own files.
	Budget       *spend.Status                `json:"budget,omitempty"`
	EnginePauses map[string]enginepause.Pause `json:"engine_pauses,omitempty"`
}

// SystemStats are the host metrics in percent, and the 1/5/15 minute load.
type SystemStats struct {
	CPUPercent    float64    `json:"cpu_percent"`
	MemoryPercent float64    `json:"memory_percent"`
	DiskPercent   float64    `json:"disk_percent"`
	LoadAverage   [3]float64 `json:"load_average"`
}

// SessionStats counts soldiers and lists the tmux sessions seen.
type SessionStats struct {
	SoldiersActive int      `json:"soldiers_active"`
	SoldiersMax    int      `json:"soldiers_max"`
	List           []string `json:"list"`
}

// MarshalJSON writes a nil List as [].
func (s SessionStats) MarshalJSON() ([]byte, error) {
	type plain SessionStats
	p := plain(s)
	if p.List == nil {
		p.List = []string{}
	}
	return json.Marshal(p)
}

// Tokens is today's token use and its budget status.
type Tokens struct {
	Status            string  `json:"status"`
	DailyCostUSD      float64 `json:"daily_cost_usd"`
	DailyInputTokens  int64   `json:"daily_input_tokens"`
	DailyOutputTokens int64   `json:"daily_output_tokens"`
}

// Snapshot is what a reader may rely on: the effective health and token
// status after accounting for a missing, broken or stale file.
type Snapshot struct {
	// Health is the level to act on: the file's, raised to at least orange
	// when the file is stale, broken or unreadable; green when missing.
	Health string
	// TokenStatus is the file's, or TokenUnknown when it has none.
	TokenStatus string
	// Missing: there is no resources.json (a fresh install): green.
	Missing bool
	// Invalid: the file exists but is not a valid resources document, or
	// could not be read: orange.
	Invalid bool
	// Stale: the timestamp is more than StaleAfter away from now: at least
	// orange.
	Stale bool
	// Age is now minus the file's timestamp (0 when there is no timestamp).
	Age time.Duration
	// Reason explains Health in one line, for logs and status screens.
	Reason string
	// Resources is the parsed document; nil when Missing or Invalid.
	Resources *Resources
}

// Admit applies the admission table to this snapshot (see Admit).
func (s Snapshot) Admit(priority string) bool {
	return Admit(s.Health, s.TokenStatus, priority)
}

// Read loads resources.json and judges it at time now (SPEC §4.4, §9.18):
//   - missing file: green, tokens unknown (nothing has measured yet);
//   - not JSON or not a valid resources document: orange, Invalid — a
//     reader cannot tell how loaded the host is, so no new work starts until
//     the chamberlain rewrites it;
//   - timestamp more than StaleAfter in the past (or in the future: a clock
//     step would otherwise keep an old file "fresh"): at least orange, Stale;
//   - no tokens object: token status unknown.
//
// The error is non-nil only when the file exists but cannot be read (for
// example permission denied); the snapshot is then orange and Invalid, so a
// caller may log the error and still act on the snapshot.
func Read(path string, now time.Time) (Snapshot, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Snapshot{Health: Green, TokenStatus: TokenUnknown, Missing: true,
			Reason: "no resources.json yet"}, nil
	}
	if err != nil {
		err = fmt.Errorf("read resources %s: %w", path, err)
		return Snapshot{Health: Orange, TokenStatus: TokenUnknown, Invalid: true,
			Reason: err.Error() + " (treated as orange)"}, err
	}
	return Judge(data, now), nil
}

// Judge is Read without the file system: it evaluates the bytes of a
// resources.json at time now.
func Judge(data []byte, now time.Time) Snapshot {
	var r Resources
	if err := schema.Decode(doc.KindResources, data, &r); err != nil {
		return Snapshot{Health: Orange, TokenStatus: TokenUnknown, Invalid: true,
			Reason: fmt.Sprintf("resources.json unusable (treated as orange): %v", err)}
	}
	s := Snapshot{Health: r.Health, TokenStatus: TokenUnknown, Resources: &r,
		Reason: "health " + r.Health + " reported by the chamberlain"}
	if r.Tokens != nil {
		s.TokenStatus = r.Tokens.Status
	}
	ts, err := doc.ParseTime(r.Timestamp)
	if err != nil {
		// The schema already checked the format; this is unreachable short
		// of a disagreement between the two parsers. Fail safe.
		s.Health, s.Invalid, s.Resources = Orange, true, nil
		s.Reason = fmt.Sprintf("resources.json unusable (treated as orange): %v", err)
		return s
	}
	s.Age = now.Sub(ts)
	if s.Age > StaleAfter || s.Age < -StaleAfter {
		s.Stale = true
		s.Health = Worse(r.Health, Orange)
		if s.Age > 0 {
			s.Reason = fmt.Sprintf("resources.json is %s old (> %s; chamberlain down?): treated as %s",
				s.Age.Round(time.Second), StaleAfter, s.Health)
		} else {
			s.Reason = fmt.Sprintf("resources.json timestamp %s is %s in the future (clock step?): treated as %s",
				r.Timestamp, (-s.Age).Round(time.Second), s.Health)
		}
	}
	return s
}

// Write validates r against the resources schema and replaces path
// atomically (temp, fsync, rename; mode 0600), so readers never see a torn
// document.
func Write(path string, r *Resources) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode resources: %w", err)
	}
	if err := schema.Validate(doc.KindResources, data); err != nil {
		return fmt.Errorf("write resources %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}
