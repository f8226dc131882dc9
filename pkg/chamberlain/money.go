package chamberlain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Money and limits, the chamberlain's side (SPEC §10.6–§10.8): package
// report reads the ledger and the pauses; here budget thresholds and engine
// pauses are alerted once each, a pause's end with a recovered note. None
// of it counts as a failure or an anomaly.

// Alert kinds of money and limits.
const (
	KindBudget = "budget"
	KindPause  = "engine-paused"
	// KindLedger is today's spend ledger with records that cannot be read:
	// the day's spend is unknown, so the king admits no task while a daily
	// budget is set, and only the operator can lift that by repairing it.
	KindLedger = "spend-ledger"
)

// observeMoney reads the ledger and the engine pauses.
func (r *Role) observeMoney(ctx context.Context, now time.Time, rep *Report) {
	// The king keeps the day ledgers in the store's spend (SPEC §11.7),
	// wherever it runs.
	m := report.ReadMoney(ctx, spend.StoreDays(r.kv), r.kv, r.cfg.Budget, now)
	for _, err := range []error{m.Err, m.PausesErr} {
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	rep.Money = m
}

// recordDaily copies today's totals into stats.json.
func (r *Role) recordDaily(m *report.Money) {
	if m != nil && m.Err == nil {
		r.stats.RecordDay(m.Spend)
	}
}

// moneyAlerts sends one alert per budget threshold per day, one per engine
// pause, and a recovered note when a pause ends.
func (r *Role) moneyAlerts(ctx context.Context, rep *Report, now time.Time) []string {
	m := rep.Money
	if m == nil {
		return nil
	}
	var errs []string
	send := func(kind, key, urgency, content string, data map[string]any) bool {
		data["kind"], data["key"] = kind, key
		if err := r.putMessage(ctx, doc.MessageNotification, kind, key, urgency, content, data, now); err != nil {
			errs = append(errs, err.Error())
			return false
		}
		return true
	}
	// once alerts a condition that is not active yet and records it.
	once := func(kind, key, urgency, content string, data map[string]any) {
		ak := alertKey(kind, key)
		if r.alerts.Active[ak] == nil && send(kind, key, urgency, content, data) {
			r.alerts.Active[ak] = &ActiveAlert{Kind: kind, Key: key, Since: now, LastSent: now, Sent: 1, Content: content}
		}
	}
	b := m.Budget
	for _, th := range []struct {
		on      bool
		name    string
		urgency string
		text    string
	}{
		{b.Warning, "warning", doc.UrgencyNormal, "💰 Daily budget at %.0f%%: %s spent today. Normal and low tasks wait once a task's budget would pass the limit."},
		{b.Exceeded, "exceeded", doc.UrgencyHigh, "💰 Daily budget used up (%.0f%%): %s. No new task starts until the day changes (host local midnight) or the budget is raised."},
	} {
		if th.on {
			once(KindBudget, th.name+"-"+b.Date, th.urgency, fmt.Sprintf(th.text, b.Ratio*100, b.Describe()),
				map[string]any{"date": b.Date, "cost_usd": b.CostUSD, "tokens": b.Tokens})
		}
	}
	for eng, p := range m.Pauses {
		content := fmt.Sprintf("⏸️ Engine %s paused by a usage limit until %s: %s. Its tasks wait and resume by themselves; nothing fails.",
			eng, fmtLocal(p.Until), redact.Clip(p.Reason, 300))
		once(KindPause, eng, doc.UrgencyNormal, content, map[string]any{"engine": eng, "until": p.Until})
	}
	today := spend.Date(now)
	for ak, act := range r.alerts.Active {
		switch act.Kind {
		case KindBudget:
			if !strings.HasSuffix(act.Key, "-"+today) {
				delete(r.alerts.Active, ak) // a past day's threshold
			}
		case KindPause:
			if _, still := m.Pauses[act.Key]; still || m.PausesErr != nil {
				continue // an unreadable file is no sign the pause ended
			}
			content := fmt.Sprintf("▶️ Recovered: engine %s resumed, its usage limit lifted (paused %s).", act.Key, now.Sub(act.Since).Round(time.Second))
			if send(KindRecovered, KindPause+"-"+act.Key, doc.UrgencyNormal, content, map[string]any{"engine": act.Key}) {
				delete(r.alerts.Active, ak)
			}
		}
	}
	return errs
}

// ledgerConditions is the alert condition of today's ledger while some of
// its records cannot be read (keyed by its date: a new day starts a new
// ledger, and the hold of the damaged one ends with its day).
func (r *Role) ledgerConditions(m *report.Money) []condition {
	n := m.Spend.Totals.Damaged
	if n == 0 {
		return nil
	}
	date := m.Budget.Date
	path := "the store's spend-" + date
	what := fmt.Sprintf("has %d damaged line%s", n, plural(n))
	var dmg *spend.DamageError
	switch {
	case errors.As(m.Err, &dmg):
		path = dmg.Path // a torn snapshot of an earlier version names its own file
	case m.Err != nil:
		what = fmt.Sprintf("cannot be read (%s)", redact.Clip(m.Err.Error(), 200))
	}
	return []condition{{Kind: KindLedger, Key: date, Urgency: doc.UrgencyHigh,
		Content: fmt.Sprintf("[urgent] the spend ledger of %s %s: admission holds while a daily budget is set; repair or remove the damaged lines in %s", date, what, path)}}
}

func fmtLocal(ts string) string {
	t, err := doc.ParseTime(ts)
	if err != nil {
		return ts
	}
	return t.In(time.Local).Format("2006-01-02 15:04 MST")
}

// holdsEvents reports whether admission is holding events on purpose: an
// engine is paused by a usage limit, the daily budget is used up, or
// today's ledger is damaged while a daily budget is set (spend.Admit).
func holdsEvents(m *report.Money) bool {
	if m == nil {
		return false
	}
	b := m.Budget
	damagedHold := b.Damaged > 0 && spend.Limited(spend.Budget{DailyUSD: b.DailyUSD, DailyTokens: b.DailyTokens})
	return len(m.Pauses) > 0 || b.Exceeded || damagedHold
}
