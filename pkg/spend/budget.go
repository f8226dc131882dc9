package spend

import (
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// WarnRatio is the share of the daily budget that triggers
// system.budget_warning (SPEC §10.7: 80 %).
const WarnRatio = 0.8

// Budget is king.yaml's budget block with a task's own budget resolved.
type Budget = config.KingBudget

// Status is today's spend against the daily budget.
type Status struct {
	Date string `json:"date"`
	// Ratio is the larger of dollars/daily_usd and tokens/daily_tokens; 0
	// when no daily budget is set.
	Ratio       float64  `json:"ratio"`
	CostUSD     float64  `json:"cost_usd"`
	Tokens      int64    `json:"tokens"`
	DailyUSD    *float64 `json:"daily_usd"`
	DailyTokens *int64   `json:"daily_tokens"`
	Warning     bool     `json:"warning"`  // at or past 80 %
	Exceeded    bool     `json:"exceeded"` // at or past 100 %
	// Damaged counts the records of today's ledger that could not be read
	// (Totals.Damaged): CostUSD and Tokens are a lower bound, the day's
	// real figure is unknown, and Admit holds every task while a daily
	// budget is set.
	Damaged int `json:"damaged,omitempty"`
}

// Limited reports whether any daily budget is set.
func Limited(b Budget) bool { return b.DailyUSD != nil || b.DailyTokens != nil }

// Evaluate compares a day's totals with the budget.
func Evaluate(date string, t Totals, b Budget) Status {
	s := Status{Date: date, CostUSD: t.CostUSD, Tokens: t.Tokens, DailyUSD: b.DailyUSD, DailyTokens: b.DailyTokens, Damaged: t.Damaged}
	if b.DailyUSD != nil {
		s.Ratio = max(s.Ratio, ratio(t.CostUSD, *b.DailyUSD))
	}
	if b.DailyTokens != nil {
		s.Ratio = max(s.Ratio, ratio(float64(t.Tokens), float64(*b.DailyTokens)))
	}
	s.Warning = Limited(b) && s.Ratio >= WarnRatio
	s.Exceeded = Limited(b) && s.Ratio >= 1
	return s
}

func ratio(v, limit float64) float64 {
	if limit <= 0 {
		if v > 0 {
			return 1e9
		}
		return 1 // a zero budget admits nothing
	}
	return v / limit
}

// TaskBudget is a task's dollar budget: the manifest's budget_usd, else
// budget.task_usd; nil when neither is set.
func TaskBudget(b Budget, m *config.Manifest) *float64 {
	if m != nil && m.BudgetUSD != nil {
		return m.BudgetUSD
	}
	return b.TaskUSD
}

// Admit decides whether a task of priority may start given today's status
// (SPEC §10.7): a high task is refused only once the daily budget is used
// up; a normal or low one also when today's spend plus its task budget
// would pass the daily budget. While today's ledger is damaged and a daily
// budget is set, every task waits: a used-up budget must not re-open
// because its records became unreadable (repairing the ledger, or the next
// day, lifts the hold). The reason says why a task waits.
func Admit(s Status, taskUSD *float64, priority string) (bool, string) {
	if s.Damaged > 0 && Limited(Budget{DailyUSD: s.DailyUSD, DailyTokens: s.DailyTokens}) {
		return false, fmt.Sprintf("today's spend ledger has %d damaged records, so the day's spend is unknown (%s read): no task starts until the ledger is repaired", s.Damaged, s.Describe())
	}
	if s.Exceeded {
		return false, fmt.Sprintf("daily budget used up (%s)", s.Describe())
	}
	if priority == doc.PriorityHigh {
		return true, ""
	}
	if s.DailyUSD != nil && taskUSD != nil && s.CostUSD+*taskUSD > *s.DailyUSD+1e-9 {
		return false, fmt.Sprintf("today's spend $%.2f + task budget $%.2f would pass the daily budget $%.2f",
			s.CostUSD, *taskUSD, *s.DailyUSD)
	}
	return true, ""
}

// Describe is a one-line account: "$0.95 of $1.00 (95%)".
func (s Status) Describe() string {
	var parts []string
	if s.DailyUSD != nil {
		parts = append(parts, fmt.Sprintf("$%.2f of $%.2f", s.CostUSD, *s.DailyUSD))
	} else {
		parts = append(parts, fmt.Sprintf("$%.2f", s.CostUSD))
	}
	if s.DailyTokens != nil {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", s.Tokens, *s.DailyTokens))
	} else {
		parts = append(parts, fmt.Sprintf("%d tokens", s.Tokens))
	}
	out := parts[0] + ", " + parts[1]
	if Limited(Budget{DailyUSD: s.DailyUSD, DailyTokens: s.DailyTokens}) {
		out += fmt.Sprintf(" (%.0f%%)", s.Ratio*100)
	} else {
		out += " (no daily budget)"
	}
	return out
}
