// Package health owns state/resources.json (seed 000's shape), the health
// levels computed from CPU and memory, the token-budget statuses, and the
// admission table the king applies and the chamberlain reports (SPEC §4.4,
// §9.18).
//
// The chamberlain measures, calls Evaluate and EvaluateTokens, and Writes
// the document. The king Reads it each tick and asks the snapshot whether a
// priority may start:
//
//	snap, err := health.Read(layout.Resources(), clock.Now())
//	// err is only an I/O problem; snap is usable (and fail-safe) either way
//	if snap.Admit(task.Priority) && inFlight < maxSoldiers { … }
//
// Everything here except Read and Write is a pure function of its inputs.
package health

import (
	"fmt"
	"strconv"
)

// Health levels, from best to worst.
const (
	Green  = "green"
	Yellow = "yellow"
	Orange = "orange"
	Red    = "red"
)

// Token budget statuses (seed 000).
const (
	TokenOK       = "ok"
	TokenWarning  = "warning"
	TokenCritical = "critical"
	TokenUnknown  = "unknown"
)

// Rank orders health levels: green 0, yellow 1, orange 2, red 3. An unknown
// level ranks as orange: what we cannot read must not admit work.
func Rank(level string) int {
	switch level {
	case Green:
		return 0
	case Yellow:
		return 1
	case Red:
		return 3
	}
	return 2
}

// Worse returns the worse of two levels; unknown levels count as orange and
// come back as Orange.
func Worse(a, b string) string {
	if Rank(b) > Rank(a) {
		a = b
	}
	return normalize(a)
}

func normalize(level string) string {
	switch level {
	case Green, Yellow, Orange, Red:
		return level
	}
	return Orange
}

// Thresholds are the chamberlain's limits in percent (chamberlain.yaml
// thresholds.*). A value strictly above a limit reaches that level.
type Thresholds struct {
	CPUYellow, CPUOrange, CPURed float64
	MemYellow, MemOrange, MemRed float64
	// DiskWarning only raises an alert; disk never changes the level.
	DiskWarning float64
}

// Evaluate computes the health level from CPU and memory usage: each metric
// gets the highest level whose limit it strictly exceeds (60.0 is green,
// 60.1 yellow, SPEC §9.18), and the worse of the two wins (seed 000's
// evaluate_health). The reason names what set the level, e.g.
// "cpu 85.0% > 80%" or "cpu 45.2%, memory 30.0% within limits".
func Evaluate(cpu, mem float64, t Thresholds) (level, reason string) {
	cpuLevel, cpuLimit := levelOf(cpu, t.CPUYellow, t.CPUOrange, t.CPURed)
	memLevel, memLimit := levelOf(mem, t.MemYellow, t.MemOrange, t.MemRed)
	level = Worse(cpuLevel, memLevel)
	if level == Green {
		return Green, fmt.Sprintf("cpu %s%%, memory %s%% within limits", pct(cpu, t.CPUYellow), pct(mem, t.MemYellow))
	}
	cpuPart := fmt.Sprintf("cpu %s%% > %g%%", pct(cpu, cpuLimit), cpuLimit)
	memPart := fmt.Sprintf("memory %s%% > %g%%", pct(mem, memLimit), memLimit)
	switch {
	case cpuLevel == memLevel:
		return level, cpuPart + ", " + memPart
	case cpuLevel == level:
		return level, cpuPart
	default:
		return level, memPart
	}
}

// levelOf returns the level v reaches and the limit it exceeded.
func levelOf(v, yellow, orange, red float64) (string, float64) {
	switch {
	case v > red:
		return Red, red
	case v > orange:
		return Orange, orange
	case v > yellow:
		return Yellow, yellow
	}
	return Green, yellow
}

// pct formats v with one decimal, or exactly when rounding would make it
// look equal to the limit ("80.04% > 80%", not "80.0% > 80%").
func pct(v, limit float64) string {
	s := fmt.Sprintf("%.1f", v)
	if back, err := strconv.ParseFloat(s, 64); err == nil && (back == limit) != (v == limit) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}

// EvaluateTokens turns today's estimated cost into a token status (seed
// 000's evaluate_token_status): critical at or above budget × criticalPct
// %, warning at or above budget × warningPct %, else ok. A budget ≤ 0 means
// no budget is known: unknown.
func EvaluateTokens(costUSD, budgetUSD, warningPct, criticalPct float64) string {
	if budgetUSD <= 0 {
		return TokenUnknown
	}
	switch {
	case costUSD >= budgetUSD*criticalPct/100:
		return TokenCritical
	case costUSD >= budgetUSD*warningPct/100:
		return TokenWarning
	}
	return TokenOK
}
