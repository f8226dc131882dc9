package operator

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Waiting is why work is held, from the king's record (pkg/waits).
type Waiting struct {
	Record waits.Record
	Err    error
}

// WaitGroup is every held event or task that shares one reason.
type WaitGroup struct {
	Reason string
	Events []string
	Tasks  []string
	// Detail, Since and Until are the oldest hold's (Since the earliest,
	// Until the latest: when the whole group is released at the latest).
	Detail string
	Since  time.Time
	Until  *time.Time
}

// Count is the number of held events and tasks.
func (g WaitGroup) Count() int { return len(g.Events) + len(g.Tasks) }

// Groups folds the record by reason, largest group first.
func (w *Waiting) Groups() []WaitGroup {
	if w == nil {
		return nil
	}
	by := map[string]*WaitGroup{}
	var order []string
	for _, x := range w.Record.Waits {
		g := by[x.Reason]
		if g == nil {
			g = &WaitGroup{Reason: x.Reason, Detail: x.Detail, Since: x.Since}
			by[x.Reason] = g
			order = append(order, x.Reason)
		}
		if x.EventID != "" {
			g.Events = append(g.Events, x.EventID)
		}
		if x.TaskID != "" {
			g.Tasks = append(g.Tasks, x.TaskID)
		}
		if !x.Since.IsZero() && (g.Since.IsZero() || x.Since.Before(g.Since)) {
			g.Since, g.Detail = x.Since, x.Detail
		}
		if x.Until != nil && (g.Until == nil || x.Until.After(*g.Until)) {
			u := *x.Until
			g.Until = &u
		}
	}
	out := make([]WaitGroup, 0, len(order))
	for _, r := range order {
		out = append(out, *by[r])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count() > out[j].Count() })
	return out
}

// print writes the Waiting section: one line per reason.
func (w *Waiting) print(out io.Writer, now time.Time) {
	if w == nil {
		return
	}
	if w.Err != nil {
		fmt.Fprintf(out, "waiting: unknown (%v)\n", w.Err)
		return
	}
	gs := w.Groups()
	if len(gs) == 0 {
		fmt.Fprintln(out, "waiting: nothing")
		return
	}
	asOf := ""
	if u := w.Record.UpdatedAt; !u.IsZero() {
		asOf = fmt.Sprintf(" (the king's record of %s ago)", max(now.Sub(u), 0).Round(time.Second))
	}
	fmt.Fprintf(out, "Waiting%s:\n", asOf)
	for _, g := range gs {
		fmt.Fprintf(out, "  %s: %s — %s%s\n", g.Reason, g.who(), g.Detail, sinceUntil(g.Since, g.Until, now))
	}
}

// who reads "evt-1" for one hold, "5 events, 2 tasks (evt-1, evt-2, …)" for many.
func (g WaitGroup) who() string {
	ids := append(append([]string{}, g.Events...), g.Tasks...)
	if len(ids) == 1 {
		return ids[0]
	}
	var parts []string
	if n := len(g.Events); n > 0 {
		parts = append(parts, plural(n, "event"))
	}
	if n := len(g.Tasks); n > 0 {
		parts = append(parts, plural(n, "task"))
	}
	shown := ids
	if len(shown) > 3 {
		shown = append(shown[:3:3], "…")
	}
	return strings.Join(parts, ", ") + " (" + strings.Join(shown, ", ") + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// sinceUntil reads " (since 10:02:03, until 11:00:00)" in local time.
func sinceUntil(since time.Time, until *time.Time, now time.Time) string {
	var parts []string
	if !since.IsZero() {
		parts = append(parts, "since "+clockTime(since, now))
	}
	if until != nil && !until.IsZero() {
		parts = append(parts, "until "+clockTime(*until, now))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// clockTime is a local time, with the date only when it is not today's.
func clockTime(t, now time.Time) string {
	t = t.In(time.Local)
	if t.Format("2006-01-02") == now.In(time.Local).Format("2006-01-02") {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}
