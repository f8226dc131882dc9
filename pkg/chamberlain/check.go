package chamberlain

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Check evaluates one report without changing anything: no state, cursor,
// registry or resources.json writes, no kills, no alerts, no events
// (chamberlain --once beside a running daemon, SPEC §9.26).
func Check(ctx context.Context, l layout.Layout, cfg Config, d Deps) (*Report, error) {
	r, err := New(l, cfg, d, ModeReadOnly)
	if err != nil {
		return nil, err
	}
	err = r.Tick(ctx)
	return r.Last, err
}

func fmtAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

func mark(v, limit float64) string {
	if v > limit {
		return "over"
	}
	return "ok"
}

// Table prints the report as the readable table of chamberlain --once.
func (rep *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("Kingdom health at %s\n\n", rep.Time.In(time.Local).Format("2006-01-02 15:04:05 MST"))
	p("KINGDOM\t%s\n", rep.Verdict().line())
	if rep.MetricsErr != nil {
		p("HEALTH\tunknown (cannot evaluate: %v)\n", rep.MetricsErr)
	} else {
		h := strings.ToUpper(rep.Health)
		if rep.Reason != "" {
			h += "  (" + rep.Reason + ")"
		}
		p("HEALTH\t%s\n\n", h)
		t := rep.Thresholds
		s := rep.Sample
		p("METRIC\tVALUE\tYELLOW\tORANGE\tRED\tLEVEL\n")
		p("cpu\t%.1f%%\t%.0f\t%.0f\t%.0f\t%s\n", s.CPU, t.CPUYellow, t.CPUOrange, t.CPURed, levelOf(s.CPU, t.CPUYellow, t.CPUOrange, t.CPURed))
		p("memory\t%.1f%%\t%.0f\t%.0f\t%.0f\t%s\n", s.Memory, t.MemoryYellow, t.MemoryOrange, t.MemoryRed, levelOf(s.Memory, t.MemoryYellow, t.MemoryOrange, t.MemoryRed))
		p("disk\t%.1f%%\twarn %.0f\t\t\t%s\n", s.Disk, t.DiskWarning, mark(s.Disk, t.DiskWarning))
		p("load\t%.2f %.2f %.2f\t\t\t\t\n", s.Load[0], s.Load[1], s.Load[2])
	}
	p("\nROLE\tSTATE\tHEARTBEAT AGE\tSESSION\tPID\n")
	for _, ro := range rep.Roles {
		ro.State = rep.RoleState(ro)
		age := "-"
		if !ro.Heartbeat.IsZero() {
			age = fmtAge(rep.Time.Sub(ro.Heartbeat))
		}
		sess, pid := "no", "-"
		if ro.Session {
			sess, pid = "yes", fmt.Sprint(ro.PID)
		}
		p("%s\t%s\t%s\t%s\t%s\n", ro.Name, ro.State, age, sess, pid)
	}
	if rep.TmuxErr != nil {
		p("(tmux: %v)\n", rep.TmuxErr)
	}
	max := 0
	if rep.Resources != nil {
		max = rep.Resources.Sessions.SoldiersMax
	}
	p("\nSOLDIERS\t%d registered (max %d), %d tmux sessions, %d unregistered past the grace\n",
		len(rep.Registered), max, len(rep.tmuxByName), len(rep.Unregistered))
	tk := rep.Tokens
	p("TOKENS\t%s  ($%.2f today, %d in / %d out)", tk.Status, tk.DailyCostUSD, tk.DailyInputTokens, tk.DailyOutputTokens)
	if rep.TokenErr != nil {
		p("  (%v)", rep.TokenErr)
	}
	if m := rep.Money; m != nil {
		p("\nBUDGET\t%s", m.Budget.Describe())
		switch {
		case m.Budget.Exceeded:
			p("  — used up: no new task starts today")
		case m.Budget.Warning:
			p("  — over 80%%")
		}
		for _, eng := range slices.Sorted(maps.Keys(m.Pauses)) {
			p("\nPAUSED\tengine %s until %s (%s)", eng, fmtLocal(m.Pauses[eng].Until), redact.Clip(m.Pauses[eng].Reason, 120))
		}
	}
	if pa := rep.Paused; pa != nil {
		p("\nPAUSED\tthe kingdom, since %s by %s: no new task starts until `start resume`", fmtLocal(pa.Since), pa.By)
	}
	for _, pk := range rep.Parks {
		p("\nPARKED\t%s", parkReason(pk))
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Watchers)) {
		if w := rep.Watchers[name]; w.Failing() {
			p("\nWATCHER\t%s failing: %d polls in a row (last: %s)", name, w.ConsecutiveFailures, redact.Clip(w.LastError, 120))
		}
	}
	p("\n\nQUEUE\tSTATE\tFILES\n")
	for _, q := range rep.Queues {
		p("%s\t%s\t%d\n", q.Queue, q.State, q.Count)
	}
	for _, e := range rep.Errors {
		p("\nwarning: %s\n", e)
	}
	return tw.Flush()
}
