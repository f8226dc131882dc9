// Package spend is the cost ledger of Kingdom (SPEC §10.6, §10.7): what
// every soldier attempt cost, in dollars and tokens, per host-local day, and
// the budget arithmetic on top of it.
//
// The king is the only writer. It records each attempt once, when it
// processes the attempt's final result and before the rename that marks the
// result processed, by appending a line to the day's journal (Open,
// Journal.Record; journal.go); the entry's key (task, attempt, soldier)
// makes a repeat after a crash a no-op, so the ledger never counts twice
// and never loses an attempt. Everyone else reads:
//
//	d, err := spend.Load(l.SpendDay(spend.Date(now)))
//	s := d.Summary()            // today's totals, per general and engine
//	st := spend.Evaluate(s.Totals, budget) // ratio, warning, exceeded
package spend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Usage is an attempt's token counts (claude's names; codex's
// cached_input_tokens maps to CacheReadInputTokens).
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Tokens is every token the model processed: input, output and cache reads
// and writes. It is what budget.daily_tokens counts.
func (u Usage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
	}
}

// Entry is one attempt in the ledger.
type Entry struct {
	Task    string `json:"task_id"`
	Attempt int    `json:"retry_count"`
	General string `json:"general"`
	Engine  string `json:"engine"`
	// CostUSD is nil when the engine gave no price (codex without
	// runtime.codex.pricing); its tokens still count.
	CostUSD     *float64 `json:"cost_usd"`
	Usage       Usage    `json:"usage"`
	Status      string   `json:"status"`
	ErrorReason string   `json:"error_reason,omitempty"`
	At          string   `json:"at"`
}

// Key identifies an attempt: task, retry_count and the attempt's own mark
// (its soldier id, else its completion time), since an attempt stopped by
// a usage limit is re-run under the same retry_count.
func Key(task string, retry int, mark string) string {
	return task + "#" + strconv.Itoa(retry) + "#" + mark
}

// Day is state/king/spend/<date>.json.
type Day struct {
	Date     string           `json:"date"`
	Attempts map[string]Entry `json:"attempts"`
}

// Totals sums attempts.
type Totals struct {
	CostUSD  float64 `json:"cost_usd"`
	Usage    Usage   `json:"usage"`
	Tokens   int64   `json:"tokens"`
	Attempts int     `json:"attempts"`
	// Unpriced counts attempts without a dollar figure.
	Unpriced int `json:"unpriced,omitempty"`
}

// Add folds one attempt into t.
func (t *Totals) Add(e Entry) {
	t.Attempts++
	t.Usage = t.Usage.Add(e.Usage)
	t.Tokens = t.Usage.Tokens()
	if e.CostUSD == nil {
		t.Unpriced++
	} else if c := *e.CostUSD; c > 0 && !math.IsInf(c, 0) && !math.IsNaN(c) {
		t.CostUSD = roundNano(t.CostUSD + c)
	}
}

// Summary is a day's totals, overall and per general and engine.
type Summary struct {
	Date     string            `json:"date"`
	Totals   Totals            `json:"totals"`
	Generals map[string]Totals `json:"generals"`
	Engines  map[string]Totals `json:"engines"`
}

// Date is the ledger day of t: the host-local date (SPEC §10.7: a new day
// resets the budget at local midnight).
func Date(t time.Time) string { return t.In(time.Local).Format("2006-01-02") }

// ErrCorrupt is matched by Load's error when the ledger does not decode.
var ErrCorrupt = errors.New("corrupt ledger")

// maxDay bounds a ledger read (a day of many thousand attempts fits).
const maxDay = 64 << 20

// Load reads a day's ledger: its snapshot, then the attempts its journal
// recorded since (journal.go); missing files are an empty day.
func Load(path, date string) (*Day, error) {
	d, err := loadSnapshot(path, date)
	if err != nil {
		return d, err
	}
	if _, _, err := replay(JournalPath(path), d); err != nil {
		return d, err
	}
	return d, nil
}

func loadSnapshot(path, date string) (*Day, error) {
	d := &Day{Date: date, Attempts: map[string]Entry{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read spend ledger %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxDay {
		return d, fmt.Errorf("read spend ledger %s: %d bytes, over the %d limit", path, st.Size(), maxDay)
	}
	if err := json.NewDecoder(f).Decode(d); err != nil {
		return &Day{Date: date, Attempts: map[string]Entry{}}, fmt.Errorf("decode spend ledger %s: %w: %w", path, ErrCorrupt, err)
	}
	if d.Attempts == nil {
		d.Attempts = map[string]Entry{}
	}
	d.Date = date
	return d, nil
}

// Save writes the ledger's snapshot (0600, write-then-rename), creating its
// 0700 directory on first use. Attempts in the day's journal still count
// (Load adds them); the king records through a Journal instead.
func Save(path string, d *Day) error {
	if err := layout.EnsureDir(filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WriteJSON(path, d)
}

// Has reports whether the attempt key is recorded.
func (d *Day) Has(key string) bool { _, ok := d.Attempts[key]; return ok }

// Put records an attempt under key; false when it already was.
func (d *Day) Put(key string, e Entry) bool {
	if d.Has(key) {
		return false
	}
	d.Attempts[key] = e
	return true
}

// Summary totals the day.
func (d *Day) Summary() Summary {
	s := Summary{Date: d.Date, Generals: map[string]Totals{}, Engines: map[string]Totals{}}
	keys := make([]string, 0, len(d.Attempts))
	for k := range d.Attempts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a stable float sum
	for _, k := range keys {
		s.add(d.Attempts[k])
	}
	return s
}

// add counts one attempt in the summary.
func (s *Summary) add(e Entry) {
	s.Totals.Add(e)
	g := s.Generals[e.General]
	g.Add(e)
	s.Generals[e.General] = g
	en := s.Engines[e.Engine]
	en.Add(e)
	s.Engines[e.Engine] = en
}

// TaskTotals sums the attempts of task in the day.
func (d *Day) TaskTotals(task string) Totals {
	var t Totals
	keys := make([]string, 0)
	for k, e := range d.Attempts {
		if e.Task == task {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Add(d.Attempts[k])
	}
	return t
}

// Merge adds o to t.
func (t *Totals) Merge(o Totals) {
	t.Attempts += o.Attempts
	t.Unpriced += o.Unpriced
	t.Usage = t.Usage.Add(o.Usage)
	t.Tokens = t.Usage.Tokens()
	t.CostUSD = roundNano(t.CostUSD + o.CostUSD)
}

// roundNano keeps sums to the nano-dollar: 0.95 + 0.10 is 1.05, and the
// rounding of thousands of attempts stays far below a cent.
func roundNano(f float64) float64 { return math.Round(f*1e9) / 1e9 }

// Priced is the cost of the attempts in t, or nil when none was priced
// (none recorded, or none with a dollar figure: SPEC §10.6's null).
func (t Totals) Priced() *float64 {
	if t.Attempts == 0 || t.Unpriced == t.Attempts {
		return nil
	}
	c := t.CostUSD
	return &c
}

// TaskTotals sums a task's attempts over the days it lived: from created
// (at most maxDays back from now) to now, one ledger per local day,
// through day (which returns the task's totals in that day's ledger).
func TaskTotals(created, now time.Time, maxDays int, day func(date string) Totals) Totals {
	from := created
	if from.IsZero() || from.After(now) || now.Sub(from) > time.Duration(maxDays-1)*24*time.Hour {
		from = now.Add(-time.Duration(maxDays-1) * 24 * time.Hour)
	}
	var tot Totals
	last := ""
	for d := from; ; d = d.Add(24 * time.Hour) {
		if d.After(now) {
			d = now
		}
		if date := Date(d); date != last {
			last = date
			tot.Merge(day(date))
		}
		if !d.Before(now) {
			return tot
		}
	}
}
