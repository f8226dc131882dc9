package report

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
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

// ReadMoney reads today's cost ledger and the engine pause file at now,
// and evaluates the spend against king.yaml's budget. Errors are kept in
// Err and PausesErr: what did load is still reported.
func ReadMoney(l layout.Layout, budget config.KingBudget, now time.Time) *Money {
	date := spend.Date(now)
	d, err := spend.Load(l.SpendDay(date), date)
	m := &Money{Spend: d.Summary(), Pauses: map[string]enginepause.Pause{}, Err: err}
	m.Budget = spend.Evaluate(date, m.Spend.Totals, budget)
	pf, err := enginepause.Load(context.Background(), kv.Files(l))
	m.PausesErr = err
	for _, eng := range pf.Engines() {
		if until, ok := pf.Active(eng, now); ok {
			p := pf[eng]
			p.Until = schema.FormatTime(until)
			m.Pauses[eng] = p
		}
	}
	return m
}
