package chamberlain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Money and limits, the chamberlain's side (SPEC §10.6–§10.8): the token
// status and resources.json tokens come from the king's cost ledger
// (Claude's stats-cache.json is only read on a day the ledger has nothing);
// stats.json keeps the daily totals; budget thresholds and engine pauses
// are alerted once each, a pause's end with a recovered note. None of it
// counts as a failure or an anomaly.

// Alert kinds of money and limits.
const (
	KindBudget = "budget"
	KindPause  = "engine-paused"
)

// statsDays is how many days of totals stats.json keeps.
const statsDays = 31

// Money is today's spend, budget and engine pauses in a Report.
type Money struct {
	Spend  spend.Summary                `json:"spend"`
	Budget spend.Status                 `json:"budget"`
	Pauses map[string]enginepause.Pause `json:"engine_pauses"`
	Err    error                        `json:"-"`
	// PausesErr: engine-pause.json did not load, so Pauses says nothing
	// about which pauses ended.
	PausesErr error `json:"-"`
}

// observeMoney reads the ledger and the pause file.
func (r *Role) observeMoney(now time.Time, rep *Report) {
	date := spend.Date(now)
	d, err := spend.Load(r.l.SpendDay(date), date)
	m := &Money{Spend: d.Summary(), Pauses: map[string]enginepause.Pause{}}
	if err != nil {
		m.Err = err
		rep.Errors = append(rep.Errors, err.Error())
	}
	m.Budget = spend.Evaluate(date, m.Spend.Totals, r.cfg.Budget)
	pf, err := enginepause.Load(r.l.EnginePause())
	if err != nil {
		m.PausesErr = err
		rep.Errors = append(rep.Errors, err.Error())
	}
	for _, eng := range pf.Engines() {
		if until, ok := pf.Active(eng, now); ok {
			p := pf[eng]
			p.Until = schema.FormatTime(until)
			m.Pauses[eng] = p
		}
	}
	rep.Money = m
}

// ledgerTokens is the token status from the ledger: against king.yaml's
// daily budget when one is set, else chamberlain.yaml token_limits. On a
// day the ledger has no attempt, stats-cache.json (when present) is used.
func (r *Role) ledgerTokens(now time.Time, m *Money) (Tokens, error) {
	if m == nil || m.Err != nil || m.Spend.Totals.Attempts == 0 {
		if tk, err := ReadTokens(r.c.StatsPath(), localDate(now), r.c); err == nil && tk.DailyCostUSD > 0 {
			return tk, nil
		}
	}
	if m == nil {
		return Tokens{Status: TokenUnknown}, nil
	}
	u := m.Spend.Totals.Usage
	tk := Tokens{
		DailyCostUSD:      round2(m.Spend.Totals.CostUSD),
		DailyInputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		DailyOutputTokens: u.OutputTokens,
	}
	switch {
	case spend.Limited(r.cfg.Budget):
		tk.Status = TokenOK
		if m.Budget.Exceeded {
			tk.Status = TokenCritical
		} else if m.Budget.Warning {
			tk.Status = TokenWarning
		}
	case r.c.TokenLimits.Enabled:
		tk.Status = health.EvaluateTokens(m.Spend.Totals.CostUSD, r.c.TokenLimits.DailyBudgetUSD, r.c.TokenLimits.WarningPct, r.c.TokenLimits.CriticalPct)
	default:
		tk.Status = TokenUnknown
	}
	return tk, m.Err
}

// recordDaily copies today's totals into stats.json, keeping statsDays.
func (r *Role) recordDaily(m *Money) {
	if m == nil || m.Err != nil {
		return
	}
	if r.stats.Daily == nil {
		r.stats.Daily = map[string]spend.Summary{}
	}
	r.stats.Daily[m.Spend.Date] = m.Spend
	if len(r.stats.Daily) > statsDays {
		days := make([]string, 0, len(r.stats.Daily))
		for d := range r.stats.Daily {
			days = append(days, d)
		}
		sort.Strings(days)
		for _, d := range days[:len(days)-statsDays] {
			delete(r.stats.Daily, d)
		}
	}
}

// moneyAlerts sends one alert per budget threshold per day, one per engine
// pause, and a recovered note when a pause ends.
func (r *Role) moneyAlerts(rep *Report, now time.Time) []string {
	m := rep.Money
	if m == nil {
		return nil
	}
	var errs []string
	send := func(kind, key, urgency, content string, data map[string]any) bool {
		data["kind"], data["key"] = kind, key
		if err := r.putMessage(schema.MessageNotification, kind, key, urgency, content, data, now); err != nil {
			errs = append(errs, err.Error())
			return false
		}
		return true
	}
	b := m.Budget
	for _, th := range []struct {
		on      bool
		name    string
		urgency string
		text    string
	}{
		{b.Warning, "warning", schema.UrgencyNormal, "💰 Daily budget at %.0f%%: %s spent today. Normal and low tasks wait once a task's budget would pass the limit."},
		{b.Exceeded, "exceeded", schema.UrgencyHigh, "💰 Daily budget used up (%.0f%%): %s. No new task starts until the day changes (host local midnight) or the budget is raised."},
	} {
		if !th.on {
			continue
		}
		key := th.name + "-" + b.Date
		ak := alertKey(KindBudget, key)
		if r.alerts.Active[ak] != nil {
			continue
		}
		content := fmt.Sprintf(th.text, b.Ratio*100, b.Describe())
		if send(KindBudget, key, th.urgency, content, map[string]any{"date": b.Date, "cost_usd": b.CostUSD, "tokens": b.Tokens}) {
			r.alerts.Active[ak] = &ActiveAlert{Kind: KindBudget, Key: key, Since: now, LastSent: now, Sent: 1, Content: content}
		}
	}
	for eng, p := range m.Pauses {
		ak := alertKey(KindPause, eng)
		if r.alerts.Active[ak] != nil {
			continue
		}
		content := fmt.Sprintf("⏸️ Engine %s paused by a usage limit until %s: %s. Its tasks wait and resume by themselves; nothing fails.",
			eng, fmtLocal(p.Until), redact.Clip(p.Reason, 300))
		if send(KindPause, eng, schema.UrgencyNormal, content, map[string]any{"engine": eng, "until": p.Until}) {
			r.alerts.Active[ak] = &ActiveAlert{Kind: KindPause, Key: eng, Since: now, LastSent: now, Sent: 1, Content: content}
		}
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
			if send(KindRecovered, KindPause+"-"+act.Key, schema.UrgencyNormal, content, map[string]any{"engine": act.Key}) {
				delete(r.alerts.Active, ak)
			}
		}
	}
	return errs
}

func fmtLocal(ts string) string {
	t, err := schema.ParseTime(ts)
	if err != nil {
		return ts
	}
	return t.In(time.Local).Format("2006-01-02 15:04 MST")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// holdsEvents reports whether admission is holding events on purpose: an
// engine is paused by a usage limit or the daily budget is used up.
func holdsEvents(m *Money) bool {
	return m != nil && (len(m.Pauses) > 0 || m.Budget.Exceeded)
}
