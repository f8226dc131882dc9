package report

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Money is today's spend, budget and engine pauses (SPEC §10.6–§10.8).
type Money struct {
	Spend  spend.Summary                `json:"spend"`
	Budget spend.Status                 `json:"budget"`
	Pauses map[string]enginepause.Pause `json:"engine_pauses"`
	Err    error                        `json:"-"`
	// PausesErr: engine-pause.json did not load, so Pauses says nothing
	// about which pauses ended.
	PausesErr error `json:"-"`
}

// ReadMoney reads today's cost ledger from days and the engine pauses
// from s (the shared state of the mode) at now, and evaluates the spend
// against king.yaml's budget. Errors are kept in Err and PausesErr: what
// did load is still reported.
func ReadMoney(ctx context.Context, days spend.Days, s kv.KV, budget config.KingBudget, now time.Time) *Money {
	date := spend.Date(now)
	d, err := days.Load(ctx, date)
	m := &Money{Spend: d.Summary(), Pauses: map[string]enginepause.Pause{}, Err: err}
	m.Budget = spend.Evaluate(date, m.Spend.Totals, budget)
	pf, err := enginepause.Load(ctx, s)
	m.PausesErr = err
	for _, eng := range pf.Engines() {
		if until, ok := pf.Active(eng, now); ok {
			p := pf[eng]
			p.Until = doc.FormatTime(until)
			m.Pauses[eng] = p
		}
	}
	return m
}
