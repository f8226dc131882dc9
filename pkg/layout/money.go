package layout

// Money and limits (SPEC §10.6–§10.8): files the king writes and the
// chamberlain, start and generals read.

// SpendDir is state/king/spend: one cost ledger per host-local day.
func (l Layout) SpendDir() string { return l.p("state", RoleKing, "spend") }

// SpendDay is state/king/spend/<YYYY-MM-DD>.json, the day's attempt costs.
func (l Layout) SpendDay(date string) string { return l.p("state", RoleKing, "spend", date+".json") }

// BudgetState is state/king/budget.json: which budget thresholds today's
// spend already crossed (each is announced once a day).
func (l Layout) BudgetState() string { return l.p("state", RoleKing, "budget.json") }

// EnginePause is state/king/engine-pause.json: {engine: {until, reason}}.
func (l Layout) EnginePause() string { return l.p("state", RoleKing, "engine-pause.json") }
