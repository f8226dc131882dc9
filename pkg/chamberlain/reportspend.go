package chamberlain

import (
	"time"

	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// reportSpendDays bounds the ledgers one report reads (a chamberlain down
// for weeks reports the last month's spend, not every day since).
const reportSpendDays = 31

// windowSpend sums the king's cost ledger over a daily report's window
// (since, until], the window its counts cover: every host-local day the
// window touches, each attempt by its own time ("at"). An attempt whose
// time does not parse counts in the report's own day. It fails (no
// figure, rather than a partial one) when a ledger does not load.
func (r *Role) windowSpend(since, until time.Time, date string) (*spend.Summary, error) {
	if since.IsZero() || !since.Before(until) {
		u := until.In(time.Local) // no window known: the report's day so far
		since = time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.Local).Add(-time.Nanosecond)
	}
	if oldest := until.AddDate(0, 0, -reportSpendDays); since.Before(oldest) {
		since = oldest
	}
	win := &spend.Day{Date: date, Attempts: map[string]spend.Entry{}}
	s := since.In(time.Local)
	last := spend.Date(until)
	for d := time.Date(s.Year(), s.Month(), s.Day(), 12, 0, 0, 0, time.Local); ; d = d.AddDate(0, 0, 1) {
		day := spend.Date(d)
		l, err := spend.Load(r.l.SpendDay(day), day)
		if err != nil {
			return nil, err
		}
		for k, e := range l.Attempts {
			at, err := schema.ParseTime(e.At)
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
