// Package spend is the cost ledger of Kingdom (SPEC §10.6, §10.7): what
// every soldier attempt cost, in dollars and tokens, per host-local day, and
// the budget arithmetic on top of it.
//
// A day's ledger is one entry per attempt in the store's key-value, in both
// modes (ledger.go): the namespace "spend-<date>", which the files store
// keeps in state/king/spend/<date>/. The king is the only writer: it
// records each attempt once, when it processes the attempt's final result
// and before it marks the result processed (Days.Open, Ledger.Record); the
// entry's key (task, attempt, soldier) makes a repeat after a crash a
// no-op, so the ledger never counts twice and never loses an attempt. A
// damaged entry costs that entry only, and is counted. Every figure is
// computed by reading the ledger, by the king and everyone else alike:
//
//	days := spend.StoreDays(kv.OnStore(st))
//	d, err := days.Load(ctx, spend.Date(now)) // err: *DamageError when records were unreadable
//	s := d.Summary()                       // today's totals, per general and engine
//	st := spend.Evaluate(date, s.Totals, budget) // ratio, warning, exceeded, damaged
//	ok, why := spend.Admit(st, taskUSD, priority) // holds every task while the day's figure is unknown
//
// Figures are bounded and sums saturate (money.go): no total is ever +Inf
// or NaN.
package spend

import (
	"sort"
	"strconv"
	"time"
)

// Usage is an attempt's token counts (claude's names; codex's
// cached_input_tokens maps to CacheReadInputTokens). Sums bound each count
// to [0, MaxTokens].
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Tokens is every token the model processed: input, output and cache reads
// and writes, saturating at MaxTokens. It is what budget.daily_tokens
// counts.
func (u Usage) Tokens() int64 {
	return AddTokens(AddTokens(u.InputTokens, u.OutputTokens), AddTokens(u.CacheReadInputTokens, u.CacheCreationInputTokens))
}

// Add returns u + v, each count saturating at MaxTokens.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              AddTokens(u.InputTokens, v.InputTokens),
		OutputTokens:             AddTokens(u.OutputTokens, v.OutputTokens),
		CacheReadInputTokens:     AddTokens(u.CacheReadInputTokens, v.CacheReadInputTokens),
		CacheCreationInputTokens: AddTokens(u.CacheCreationInputTokens, v.CacheCreationInputTokens),
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

// Day is a day's ledger as read (Load).
type Day struct {
	Date     string
	Attempts map[string]Entry
	// Damaged counts the records that could not be read (a damaged
	// entry, an unreadable store): the day's figures are then a lower
	// bound. Summary carries it in its Totals.
	Damaged int
	order   []string // Attempts' keys in the order Put added them
}

// Totals sums attempts.
type Totals struct {
	CostUSD  float64 `json:"cost_usd"`
	Usage    Usage   `json:"usage"`
	Tokens   int64   `json:"tokens"`
	Attempts int     `json:"attempts"`
	// Unpriced counts attempts without a dollar figure.
	Unpriced int `json:"unpriced,omitempty"`
	// Damaged counts the ledger's records that could not be read (only in
	// a day's overall totals: a damaged record names no general): CostUSD
	// and Tokens are then a lower bound, and Admit holds every task.
	Damaged int `json:"damaged,omitempty"`
}

// Add folds one attempt into t.
func (t *Totals) Add(e Entry) {
	t.Attempts++
	t.Usage = t.Usage.Add(e.Usage)
	t.Tokens = t.Usage.Tokens()
	if e.CostUSD == nil {
		t.Unpriced++
	} else {
		t.CostUSD = AddUSD(t.CostUSD, *e.CostUSD)
	}
}

// Merge adds o to t.
func (t *Totals) Merge(o Totals) {
	t.Attempts += o.Attempts
	t.Unpriced += o.Unpriced
	t.Damaged += o.Damaged
	t.Usage = t.Usage.Add(o.Usage)
	t.Tokens = t.Usage.Tokens()
	t.CostUSD = AddUSD(t.CostUSD, o.CostUSD)
}

// Priced is the cost of the attempts in t, or nil when none was priced
// (none recorded, or none with a dollar figure: SPEC §10.6's null).
func (t Totals) Priced() *float64 {
	if t.Attempts == 0 || t.Unpriced == t.Attempts {
		return nil
	}
	c := t.CostUSD
	return &c
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

// Has reports whether the attempt key is recorded.
func (d *Day) Has(key string) bool { _, ok := d.Attempts[key]; return ok }

// Put records an attempt under key in memory; false when it already was.
func (d *Day) Put(key string, e Entry) bool {
	if d.Has(key) {
		return false
	}
	if d.Attempts == nil {
		d.Attempts = map[string]Entry{}
	}
	d.Attempts[key] = e
	d.order = append(d.order, key)
	return true
}

// Summary totals the day, in the ledger's order (every reader gets the
// same float sum).
func (d *Day) Summary() Summary {
	s := Summary{Date: d.Date, Generals: map[string]Totals{}, Engines: map[string]Totals{}}
	s.Totals.Damaged = d.Damaged
	for _, k := range d.keys("") {
		e := d.Attempts[k]
		s.Totals.Add(e)
		g := s.Generals[e.General]
		g.Add(e)
		s.Generals[e.General] = g
		en := s.Engines[e.Engine]
		en.Add(e)
		s.Engines[e.Engine] = en
	}
	return s
}

// TaskTotals sums the attempts of task in the day.
func (d *Day) TaskTotals(task string) Totals {
	var t Totals
	for _, k := range d.keys(task) {
		t.Add(d.Attempts[k])
	}
	return t
}

// keys are the day's attempt keys (of task, unless "") in the order they
// were added, or sorted when Attempts was filled without Put.
func (d *Day) keys(task string) []string {
	all := d.order
	if len(all) != len(d.Attempts) {
		all = make([]string, 0, len(d.Attempts))
		for k := range d.Attempts {
			all = append(all, k)
		}
		sort.Strings(all)
	}
	if task == "" {
		return all
	}
	var keys []string
	for _, k := range all {
		if d.Attempts[k].Task == task {
			keys = append(keys, k)
		}
	}
	return keys
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
