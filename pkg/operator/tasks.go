package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// TaskRow is one line of `start tasks` (and one object of --json).
type TaskRow struct {
	ID      string `json:"id"`
	EventID string `json:"event_id"`
	State   string `json:"state"` // pending | in_progress | completed | rejected
	Status  string `json:"status"`
	General string `json:"general"`
	Type    string `json:"type"`
	// Attempt is retry_count + 1: the first run is attempt 1. Everything
	// start prints says "attempt N" in this sense; RetryCount is the raw
	// field of the task file.
	Attempt    int `json:"attempt"`
	RetryCount int `json:"retry_count"`
	// Session is the running soldier's tmux session (in_progress only).
	Session    string `json:"session,omitempty"`
	CreatedAt  string `json:"created_at"`
	AgeSeconds int64  `json:"age_seconds"`
	// CostUSD is the task's spend over its attempts (the king's ledger in
	// the store), else the final result's figure; null when no attempt was
	// priced.
	CostUSD *float64 `json:"cost_usd"`
	Reason  string   `json:"error_reason,omitempty"`
	// CancelledBy is who asked for the cancel (an operator's user, or
	// slack:<user> from a button), when the task was cancelled.
	CancelledBy string `json:"cancelled_by,omitempty"`
	NotBefore   string `json:"not_before,omitempty"`
	// Waiting says why a pending task does not start yet (tasks_wait.go).
	Waiting *TaskWait `json:"waiting,omitempty"`
	// Host is the host that runs the task (its claim's holder), ran it
	// (the task's host, else its final result's), or alone may run it (a
	// pending resume); empty when the store names none (one machine).
	Host string `json:"host,omitempty"`
}

// RecentWindow is how far back `start tasks` lists finished tasks (all of
// them with --all).
const RecentWindow = 24 * time.Hour

// ListTasks reads every task in pending/ and in_progress/, and the finished
// ones created within window (0: all), oldest first.
func ListTasks(ctx context.Context, sh *Shared, now time.Time, window time.Duration) ([]TaskRow, error) {
	ledger := &ledgerReader{ctx: ctx, src: spend.StoreDays(sh.KV), days: map[string]*spend.Day{}}
	holds := readTaskHolds(ctx, sh, now)
	var rows []TaskRow
	for _, st := range []string{layout.Pending, layout.InProgress, layout.Completed, layout.Rejected} {
		docs, err := sh.Store.List(ctx, layout.QTasks, st)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var t doc.Task
			if json.Unmarshal(d.Data, &t) != nil || t.ID == "" {
				continue
			}
			created, _ := doc.ParseTime(t.CreatedAt)
			finished := st == layout.Completed || st == layout.Rejected
			if finished && window > 0 && !created.IsZero() && now.Sub(created) > window {
				continue
			}
			if st == layout.InProgress && t.Status == doc.TaskPending {
				// A claim moves the file without rewriting it: the
				// directory says what the task does.
				t.Status = doc.TaskInProgress
			}
			r := TaskRow{ID: t.ID, EventID: t.EventID, State: st, Status: t.Status, General: t.TargetGeneral, Type: t.Type,
				Attempt: t.RetryCount + 1, RetryCount: t.RetryCount, CreatedAt: t.CreatedAt, NotBefore: t.NotBefore, Host: t.Host}
			switch st {
			case layout.InProgress:
				r.Session = holds.session(t.ID)
				if h := d.Claim.Holder; h != "" {
					r.Host = h
				}
			case layout.Pending:
				r.Waiting = holds.wait(t, now)
			}
			if !created.IsZero() {
				r.AgeSeconds = int64(now.Sub(created).Seconds())
			}
			res := readResult(ctx, sh.KV, t.ID)
			r.CostUSD, r.Reason = res.CostUSD, res.ErrorReason
			if finished && r.Host == "" {
				r.Host = res.Host
			}
			if c := ledger.taskCost(t.ID, created, now); c != nil {
				r.CostUSD = c
			}
			if rec := control.ReadCancelled(ctx, sh.KV, t.ID); rec != nil && finished {
				if r.Reason == "" {
					r.Reason = doc.ReasonCancelled
				}
				if r.Reason == doc.ReasonCancelled {
					r.CancelledBy = rec.By
				}
			}
			rows = append(rows, r)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].CreatedAt != rows[j].CreatedAt {
			return rows[i].CreatedAt < rows[j].CreatedAt
		}
		return rows[i].ID < rows[j].ID
	})
	return rows, nil
}

// resultFacts is what a listing reads of a task's final result.
type resultFacts struct {
	CostUSD     *float64 `json:"cost_usd"`
	ErrorReason string   `json:"error_reason"`
	Host        string   `json:"host"`
}

// readResult reads a task's final result (kv.NSResults: its file in file
// mode); none, or one that does not decode, reads as empty.
func readResult(ctx context.Context, s kv.KV, task string) resultFacts {
	var r resultFacts
	if kv.GetJSON(ctx, s, kv.NSResults, task, &r) != nil {
		return resultFacts{}
	}
	return r
}

// PrintTasks writes the rows as a table.
func PrintTasks(w io.Writer, rows []TaskRow, paused *control.Pause) error {
	if paused != nil {
		fmt.Fprintf(w, "PAUSED since %s by %s: no new task starts (`start resume`)\n\n", paused.Since, paused.By)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no tasks")
		return err
	}
	// The HOST column shows when some row names a host (one machine's
	// rows name none).
	hosts := false
	for _, r := range rows {
		hosts = hosts || r.Host != ""
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "TASK\tEVENT\tSTATE\tGENERAL\tSESSION\tTYPE\tATTEMPT\tAGE\tCOST\tOUTCOME"
	if hosts {
		head = "TASK\tEVENT\tSTATE\tGENERAL\tHOST\tSESSION\tTYPE\tATTEMPT\tAGE\tCOST\tOUTCOME"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		cost := "-"
		if r.CostUSD != nil {
			cost = fmt.Sprintf("$%.2f", *r.CostUSD)
		}
		outcome := r.Status
		if r.Reason != "" {
			outcome += " (" + r.Reason
			if r.CancelledBy != "" {
				outcome += " by " + r.CancelledBy
			}
			outcome += ")"
		}
		if r.Waiting != nil {
			outcome = "waiting: " + r.Waiting.Text
		}
		general := r.General
		if hosts {
			general += "\t" + dash(r.Host)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\tattempt %d\t%s\t%s\t%s\n", r.ID, dash(r.EventID), r.State, general,
			dash(r.Session), r.Type, r.Attempt, (time.Duration(r.AgeSeconds) * time.Second).String(), cost, outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if note := gapNote(rows); note != "" {
		_, err := fmt.Fprintln(w, "\n"+note)
		return err
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Operator names who made a control request: $SUDO_USER or $USER, @host.
func Operator() string {
	u := os.Getenv("SUDO_USER")
	if u == "" {
		u = os.Getenv("USER")
	}
	if u == "" {
		u = "operator"
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		u += "@" + h
	}
	return u
}

// ledgerReader sums a task's attempts from the spend ledger, loading each
// day once.
type ledgerReader struct {
	ctx  context.Context
	src  spend.Days
	days map[string]*spend.Day
}

// maxLedgerDays bounds the days read for one task.
const maxLedgerDays = 8

func (r *ledgerReader) taskCost(task string, created, now time.Time) *float64 {
	return spend.TaskTotals(created, now, maxLedgerDays, func(date string) spend.Totals {
		d, ok := r.days[date]
		if !ok {
			d, _ = r.src.Load(r.ctx, date)
			r.days[date] = d
		}
		if d == nil {
			return spend.Totals{}
		}
		return d.TaskTotals(task)
	}).Priced()
}
