package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// EventRow is one line of `start events` (and one object of --json).
type EventRow struct {
	ID         string `json:"id"`
	State      string `json:"state"` // pending | petitioning
	Type       string `json:"type"`
	Source     string `json:"source"`
	Priority   string `json:"priority"`
	CreatedAt  string `json:"created_at"`
	AgeSeconds int64  `json:"age_seconds"`
	// Waiting is the king's reason for holding it (pkg/waits); nil when the
	// record names none (the king has not looked at it yet, or will
	// dispatch it at its next tick).
	Waiting *waits.Wait `json:"waiting"`
}

// WaitingEventStates are the event states that are still waiting for a
// task: pending (not yet admitted) and petitioning (a classifier picks its
// general).
var WaitingEventStates = []string{layout.Pending, layout.Petitioning}

// ListEvents reads the events still waiting in the queue, oldest first.
func ListEvents(ctx context.Context, sh *Shared, now time.Time) ([]EventRow, error) {
	rec, _ := waits.Read(ctx, sh.KV)
	held := rec.ByID()
	var rows []EventRow
	for _, st := range WaitingEventStates {
		docs, err := sh.Store.List(ctx, layout.QEvents, st)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var ev doc.Event
			if json.Unmarshal(d.Data, &ev) != nil || ev.ID == "" {
				continue
			}
			r := EventRow{ID: ev.ID, State: st, Type: ev.Type, Source: ev.Source, Priority: ev.Priority, CreatedAt: ev.CreatedAt}
			if c, err := doc.ParseTime(ev.CreatedAt); err == nil {
				r.AgeSeconds = int64(now.Sub(c).Seconds())
			}
			if w, ok := held[ev.ID]; ok {
				r.Waiting = &w
			}
			rows = append(rows, r)
		}
	}
	// SPEC §9.23: oldest first = created_at, then id.
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].CreatedAt != rows[j].CreatedAt {
			return rows[i].CreatedAt < rows[j].CreatedAt
		}
		return rows[i].ID < rows[j].ID
	})
	return rows, nil
}

// PrintEvents writes the rows as a table.
func PrintEvents(w io.Writer, rows []EventRow, now time.Time) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no events waiting")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tSTATE\tTYPE\tSOURCE\tPRIORITY\tAGE\tWAITING")
	for _, r := range rows {
		why := "-"
		if r.State == layout.Petitioning {
			why = "a classifier picks its general"
		}
		if x := r.Waiting; x != nil {
			why = x.Reason
			if x.Detail != "" {
				why += ": " + x.Detail
			}
			why += sinceUntil(time.Time{}, x.Until, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, r.Type, r.Source, r.Priority,
			(time.Duration(r.AgeSeconds) * time.Second).String(), why)
	}
	return tw.Flush()
}
