package chamberlain

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
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
	Tasks              ReportTasks        `json:"tasks"`
	Soldiers           ReportSoldiers     `json:"soldiers"`
	AvgDurationSeconds map[string]float64 `json:"avg_duration_seconds"`
	// Spend is the cost ledger's totals over the report's window, Since to
	// Until, as the counts (SPEC §10.6); its date is the report's.
	Spend *spend.Summary `json:"spend,omitempty"`
}

// ReportTasks counts task outcomes.
type ReportTasks struct {
	Created    int `json:"created"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	NeedsHuman int `json:"needs_human"`
}

// ReportSoldiers counts soldiers.
type ReportSoldiers struct {
	Spawned int `json:"spawned"`
	Timeout int `json:"timeout"`
}

// dailyReport writes the report file, queues it as a report message and
// starts the next accumulation.
func (r *Role) dailyReport(now time.Time) error {
	acc := &r.state.Report
	local := now.In(time.Local)
	doc := DailyReport{
		Type: "daily_report", Date: local.Format("2006-01-02"),
		Since: schema.FormatTime(acc.Since), Until: schema.FormatTime(now),
		Tasks:              ReportTasks{Created: acc.Created, Completed: acc.Completed, Failed: acc.Failed, NeedsHuman: acc.NeedsHuman},
		Soldiers:           ReportSoldiers{Spawned: acc.Spawned, Timeout: acc.Timeout},
		AvgDurationSeconds: map[string]float64{},
	}
	for g, n := range acc.DurCount {
		if n > 0 {
			doc.AvgDurationSeconds[g] = round1(acc.DurSum[g] / float64(n))
		}
	}
	if s, err := r.windowSpend(acc.Since, now, doc.Date); err == nil {
		doc.Spend = s
	} else {
		r.log.Warn("daily report without spend", "err", err)
	}
	ymd := local.Format("20060102")
	if err := atomicfile.WriteJSON(r.l.DailyReport(ymd), doc); err != nil {
		return fmt.Errorf("write daily report: %w", err)
	}
	var ctx map[string]any
	b, _ := json.Marshal(doc)
	_ = json.Unmarshal(b, &ctx)
	// The id's <unix> is the local midnight of the report's day, so a repeat
	// after a crash finds the same id and queues nothing twice.
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.Local)
	err := r.putMessage(schema.MessageReport, KindReport, ymd, schema.UrgencyNormal, reportText(doc),
		map[string]any{"report": ctx}, midnight)
	if err != nil && !errors.Is(err, queue.ErrExists) {
		return err
	}
	*acc = ReportAcc{}
	acc.init(now)
	return nil
}

func reportText(d DailyReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Daily report %s: tasks %d created, %d completed, %d failed, %d need a human; soldiers %d spawned, %d timed out",
		d.Date, d.Tasks.Created, d.Tasks.Completed, d.Tasks.Failed, d.Tasks.NeedsHuman, d.Soldiers.Spawned, d.Soldiers.Timeout)
	gens := make([]string, 0, len(d.AvgDurationSeconds))
	for g := range d.AvgDurationSeconds {
		gens = append(gens, g)
	}
	sort.Strings(gens)
	for i, g := range gens {
		if i == 0 {
			b.WriteString("; average duration")
		}
		fmt.Fprintf(&b, " %s %s", g, (time.Duration(d.AvgDurationSeconds[g]) * time.Second).String())
	}
	if s := d.Spend; s != nil {
		fmt.Fprintf(&b, "; spent $%.2f, %d tokens over %d attempts", s.Totals.CostUSD, s.Totals.Tokens, s.Totals.Attempts)
		for _, g := range sortedKeys(s.Generals) {
			fmt.Fprintf(&b, " (%s $%.2f)", g, s.Generals[g].CostUSD)
		}
	}
	return b.String()
}
