// Package report keeps the kingdom's accounts (seed 001's consumer side,
// SPEC §10.6): logs/analysis/stats.json (totals, per-general outcomes and
// durations, each day's spend), the daily report
// (logs/analysis/daily-YYYYMMDD.json), today's spend and budget from the
// king's cost ledger, and the token status resources.json carries.
//
// The chamberlain drives it. Every internal event it consumes goes through
// Apply into Stats and the report's Acc; every tick it reads ReadMoney and
// Tokens; its daily report job calls Issue, queues the message built from
// Text, and starts a new Acc. The package writes only the report file; the
// chamberlain persists Stats and Acc with the rest of its state.
package report

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// DailyReport is seed 001's daily_report document
// (logs/analysis/daily-YYYYMMDD.json), covering the events consumed since
// the previous report.
type DailyReport struct {
	Type               string             `json:"type"`
	Date               string             `json:"date"`
	Since              string             `json:"since"`
	Until              string             `json:"until"`
	Tasks              Tasks              `json:"tasks"`
	Soldiers           Soldiers           `json:"soldiers"`
	AvgDurationSeconds map[string]float64 `json:"avg_duration_seconds"`
	// Spend is the cost ledger's totals over the report's window, Since to
	// Until, as the counts (SPEC §10.6); its date is the report's.
	Spend *spend.Summary `json:"spend,omitempty"`
}

// Tasks counts task outcomes.
type Tasks struct {
	Created    int `json:"created"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	NeedsHuman int `json:"needs_human"`
}

// Soldiers counts soldiers.
type Soldiers struct {
	Spawned int `json:"spawned"`
	Timeout int `json:"timeout"`
}

// Acc counts events for the next daily report (kept in the chamberlain's
// state.json between ticks).
type Acc struct {
	Since      time.Time          `json:"since"`
	Created    int                `json:"tasks_created"`
	Completed  int                `json:"tasks_completed"`
	Failed     int                `json:"tasks_failed"`
	NeedsHuman int                `json:"tasks_needs_human"`
	Spawned    int                `json:"soldiers_spawned"`
	Timeout    int                `json:"soldiers_timeout"`
	DurSum     map[string]float64 `json:"duration_sum"`
	DurCount   map[string]int     `json:"duration_count"`
}

// Init fills what a freshly decoded (or zero) Acc lacks; now starts its
// window.
func (a *Acc) Init(now time.Time) {
	if a.Since.IsZero() {
		a.Since = now
	}
	if a.DurSum == nil {
		a.DurSum = map[string]float64{}
	}
	if a.DurCount == nil {
		a.DurCount = map[string]int{}
	}
}

// Issue builds the report of acc's window ending at now, with the ledger's
// spend over that window (left out, and said in spendErr, when a ledger
// does not load), and writes it to logs/analysis/daily-YYYYMMDD.json.
func Issue(ctx context.Context, l layout.Layout, days spend.Days, acc *Acc, now time.Time) (rep DailyReport, spendErr, err error) {
	local := now.In(time.Local)
	rep = DailyReport{
		Type: "daily_report", Date: local.Format("2006-01-02"),
		Since: doc.FormatTime(acc.Since), Until: doc.FormatTime(now),
		Tasks:              Tasks{Created: acc.Created, Completed: acc.Completed, Failed: acc.Failed, NeedsHuman: acc.NeedsHuman},
		Soldiers:           Soldiers{Spawned: acc.Spawned, Timeout: acc.Timeout},
		AvgDurationSeconds: map[string]float64{},
	}
	for g, n := range acc.DurCount {
		if n > 0 {
			rep.AvgDurationSeconds[g] = round1(acc.DurSum[g] / float64(n))
		}
	}
	rep.Spend, spendErr = WindowSpend(ctx, days, acc.Since, now, rep.Date)
	if err := atomicfile.WriteJSON(l.DailyReport(local.Format("20060102")), rep); err != nil {
		return rep, spendErr, fmt.Errorf("write daily report: %w", err)
	}
	return rep, spendErr, nil
}

// Text is the report as one readable message.
func Text(d DailyReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Daily report %s: tasks %d created, %d completed, %d failed, %d need a human; soldiers %d spawned, %d timed out",
		d.Date, d.Tasks.Created, d.Tasks.Completed, d.Tasks.Failed, d.Tasks.NeedsHuman, d.Soldiers.Spawned, d.Soldiers.Timeout)
	for i, g := range slices.Sorted(maps.Keys(d.AvgDurationSeconds)) {
		if i == 0 {
			b.WriteString("; average duration")
		}
		fmt.Fprintf(&b, " %s %s", g, (time.Duration(d.AvgDurationSeconds[g]) * time.Second).String())
	}
	if s := d.Spend; s != nil {
		fmt.Fprintf(&b, "; spent $%.2f, %d tokens over %d attempts", s.Totals.CostUSD, s.Totals.Tokens, s.Totals.Attempts)
		for _, g := range slices.Sorted(maps.Keys(s.Generals)) {
			fmt.Fprintf(&b, " (%s $%.2f)", g, s.Generals[g].CostUSD)
		}
	}
	return b.String()
}

// spendDays bounds the ledgers one report reads (a chamberlain down for
// weeks reports the last month's spend, not every day since).
const spendDays = 31

// WindowSpend sums the king's cost ledger over a daily report's window
// (since, until], the window its counts cover: every host-local day the
// window touches, each attempt by its own time ("at"). An attempt whose
// time does not parse counts in the report's own day. It fails (no
// figure, rather than a partial one) when a ledger does not load.
func WindowSpend(ctx context.Context, days spend.Days, since, until time.Time, date string) (*spend.Summary, error) {
	if since.IsZero() || !since.Before(until) {
		u := until.In(time.Local) // no window known: the report's day so far
		since = time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.Local).Add(-time.Nanosecond)
	}
	if oldest := until.AddDate(0, 0, -spendDays); since.Before(oldest) {
		since = oldest
	}
	win := &spend.Day{Date: date, Attempts: map[string]spend.Entry{}}
	s := since.In(time.Local)
	last := spend.Date(until)
	for d := time.Date(s.Year(), s.Month(), s.Day(), 12, 0, 0, 0, time.Local); ; d = d.AddDate(0, 0, 1) {
		day := spend.Date(d)
		ld, err := days.Load(ctx, day)
		if err != nil {
			return nil, err
		}
		for k, e := range ld.Attempts {
			at, err := doc.ParseTime(e.At)
			if err != nil {
				if day == date {
					win.Put(k, e)
				}
				continue
			}
			if at.After(since) && !at.After(until) {
				win.Put(k, e)
			}
		}
		if day >= last {
			break
		}
	}
	sum := win.Summary()
	return &sum, nil
}

// round1 rounds a duration in seconds to one decimal.
func round1(f float64) float64 { return math.Round(f*10) / 10 }

// round2 rounds a dollar amount to cents.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
