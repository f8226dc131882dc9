package operator

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// MoneyStatus is today's spend against the budget and the engines paused
// by a usage limit (SPEC §10.7, §10.8), for `start status`.
type MoneyStatus struct {
	Budget spend.Status
	// Paused maps an engine to the end of its pause (only active pauses).
	Paused map[string]time.Time
	Reason map[string]string
	Errs   []error
}

// readMoney reads today's spend (the shared store's ledger), the budget
// config and the engine pauses (the shared store's).
func readMoney(ctx context.Context, sh *Shared, now time.Time) *MoneyStatus {
	m := &MoneyStatus{Paused: map[string]time.Time{}, Reason: map[string]string{}}
	var b spend.Budget
	if k, err := config.LoadKing(sh.Layout.ConfigFile(config.KingFile)); err == nil {
		b = k.Budget
	} else {
		m.Errs = append(m.Errs, err)
	}
	date := spend.Date(now)
	d, err := spend.StoreDays(sh.KV).Load(ctx, date)
	if err != nil {
		m.Errs = append(m.Errs, err)
	}
	m.Budget = spend.Evaluate(date, d.Summary().Totals, b)
	pf, err := enginepause.Load(ctx, sh.KV)
	if err != nil {
		m.Errs = append(m.Errs, err)
	}
	for _, eng := range pf.Engines() {
		if until, ok := pf.Active(eng, now); ok {
			m.Paused[eng] = until
			m.Reason[eng] = pf[eng].Reason
		}
	}
	return m
}

func (m *MoneyStatus) print(w io.Writer) {
	if m == nil {
		return
	}
	note := ""
	switch {
	case m.Budget.Exceeded:
		note = " — used up: no new task starts today"
	case m.Budget.Warning:
		note = " — over 80%"
	}
	fmt.Fprintf(w, "spend today: %s%s\n", m.Budget.Describe(), note)
	for _, eng := range slices.Sorted(maps.Keys(m.Paused)) {
		fmt.Fprintf(w, "engine %s: paused by a usage limit until %s\n", eng, m.Paused[eng].In(time.Local).Format("2006-01-02 15:04:05 MST"))
	}
	for _, err := range m.Errs {
		fmt.Fprintf(w, "warning: %v\n", err)
	}
}
