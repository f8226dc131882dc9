package chamberlain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Exit codes of chamberlain --once (SPEC §10.12).
const (
	VerdictOK       = 0 // all well
	VerdictDegraded = 1 // yellow/orange health, a general down, a watcher failing, the kingdom paused, a park
	VerdictDown     = 2 // red health, or sentinel, king, envoy or chamberlain down
	VerdictUnknown  = 3 // cannot evaluate (no base dir, bad config, no metrics)
)

// ExitCodesHelp names the exit codes for --help.
const ExitCodesHelp = "chamberlain --once exits 0 when all is well, 1 degraded (health yellow or orange, a general down, " +
	"a watcher failing on every poll, the kingdom paused by `start pause`, a general or item parked by the breaker, a host lost past store.takeover_seconds, or the " +
	"event log held back by an open transaction), 2 down (health red, the store unreachable, or sentinel, king, " +
	"envoy or chamberlain down), 3 when it cannot evaluate (no installation, a configuration that does not load, no metrics)."

// coreRoles are the roles whose absence stops the kingdom. The chamberlain
// is one of them: without it resources.json goes stale, and the king treats
// a resources.json older than 120 s as orange and admits no new task — the
// kingdom is as stopped as without a king.
var coreRoles = map[string]bool{
	layout.RoleSentinel: true, layout.RoleKing: true, layout.RoleEnvoy: true, layout.RoleChamberlain: true,
}

// Verdict is the judgement of the whole kingdom: resource health, every
// role `start` should run (sentinel, king, envoy, chamberlain and one
// general per installed manifest), the sentinel's watchers, the
// operator's pause and the breaker's parks. chamberlain --once --json prints it beside the
// resources document (SPEC §11.5).
type Verdict struct {
	Exit int `json:"exit"`
	// Problems names each reason Exit is not 0.
	Problems []Problem `json:"problems"`
}

// Problem is one reason for a verdict: a role that is down or cannot reach
// the store, or a named check (health, config, tmux, kingdom, store, host,
// event log, watcher:<name>) that fails.
type Problem struct {
	Role   string `json:"role,omitempty"`
	Check  string `json:"check,omitempty"`
	Reason string `json:"reason"`
}

// String reads "king down (no tmux session)", "health red (cpu …)".
func (p Problem) String() string {
	name := p.Role
	if name == "" {
		name = p.Check
	}
	return name + " " + p.Reason
}

// RoleDown says why a role counts as down, or "" when it is up: no live
// tmux session, or a heartbeat older than the threshold (a heartbeat older
// than the session counts from the session's start, SPEC §9.14). A role
// standing by for another host's leader, or waiting for the store, is not
// down.
func (rep *Report) RoleDown(ro RoleStatus) string {
	switch {
	case ro.State == RoleStandby || ro.State == RoleStoreWait:
		return ""
	case !ro.Session && rep.TmuxErr == nil:
		return "no tmux session"
	case ro.State == RoleNotStarted && !ro.Session:
		return "never started"
	case ro.State == RoleDead:
		return "heartbeat " + fmtAge(ro.Age) + " old"
	}
	return ""
}

// RoleState is a role's state as the table and the dashboard show it:
// "ok", "standby (leader on <host>)", "store unreachable since …",
// "down: no tmux session".
func (rep *Report) RoleState(ro RoleStatus) string {
	switch {
	case ro.Outage != nil:
		return ro.Outage.reason()
	case ro.State == RoleStandby:
		return "standby (leader on " + ro.Standby + ")"
	case ro.State == RoleStoreWait && rep.StoreErr != nil:
		return "waiting for the store (" + rep.StoreErr.reason() + ")"
	}
	if why := rep.RoleDown(ro); why != "" && ro.State != RoleDead {
		return "down: " + why
	}
	return ro.State
}

// Verdict computes chamberlain --once's exit code and the problems behind it.
func (rep *Report) Verdict() Verdict {
	v := Verdict{Problems: []Problem{}}
	raise := func(code int, p Problem) {
		v.Exit = max(v.Exit, code)
		v.Problems = append(v.Problems, p)
	}
	if rep == nil {
		raise(VerdictUnknown, Problem{Check: "report", Reason: "missing"})
		return v
	}
	if rep.ConfigErr != nil {
		raise(VerdictUnknown, Problem{Check: "config", Reason: "cannot evaluate: " + rep.ConfigErr.Error()})
	}
	if rep.MetricsErr != nil || rep.Health == "" {
		raise(VerdictUnknown, Problem{Check: "resources", Reason: fmt.Sprintf("cannot evaluate: %v", rep.MetricsErr)})
	} else {
		switch rep.Health {
		case Red:
			raise(VerdictDown, Problem{Check: "health", Reason: "red (" + rep.Reason + ")"})
		case Yellow, Orange:
			raise(VerdictDegraded, Problem{Check: "health", Reason: rep.Health + " (" + rep.Reason + ")"})
		}
	}
	if rep.TmuxErr != nil {
		raise(VerdictDegraded, Problem{Check: "tmux", Reason: "sessions unreadable: " + rep.TmuxErr.Error()})
	}
	rep.storeProblems(raise)
	for _, ro := range rep.Roles {
		if ro.Outage != nil {
			// Weather, not a fault (SPEC §12.2): named as such, never
			// "down" or hung.
			raise(VerdictDown, Problem{Role: ro.Name, Reason: ro.Outage.reason()})
			continue
		}
		why := rep.RoleDown(ro)
		if why == "" {
			continue
		}
		code := VerdictDegraded
		if coreRoles[ro.Name] {
			code = VerdictDown
		}
		raise(code, Problem{Role: ro.Name, Reason: "down (" + why + ")"})
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Watchers)) {
		if w := rep.Watchers[name]; w.Failing() {
			raise(VerdictDegraded, Problem{Check: "watcher:" + name, Reason: fmt.Sprintf("failing: %d polls in a row (last: %s)",
				w.ConsecutiveFailures, redact.Clip(w.LastError, 200))})
		}
	}
	if p := rep.Paused; p != nil {
		// A pause is the operator's choice, but a forgotten one stops all
		// work as surely as a dead king: it is named until it is lifted.
		reason := "paused: no new task starts until `start resume`"
		if p.Since != "" {
			reason = fmt.Sprintf("paused since %s by %s: no new task starts until `start resume`", fmtLocal(p.Since), p.By)
		}
		raise(VerdictDegraded, Problem{Check: "kingdom", Reason: reason})
	}
	for _, p := range rep.Parks {
		// A warning, never down: the breaker holds back work that burns
		// money in a loop; the rest of the kingdom runs.
		raise(VerdictDegraded, Problem{Check: "park", Reason: parkReason(p)})
	}
	return v
}

// parkReason is a park with its evidence on one line: "general gen-pr
// parked since …: <reason>; last: task-… EngineError: exit 1; canary after
// …; `start unpark gen-pr` lifts it".
func parkReason(p parks.Park) string {
	s := fmt.Sprintf("%s %s parked since %s: %s", p.Kind, p.Name, fmtLocal(doc.FormatTime(p.Since)), p.Reason)
	var last []string
	for _, a := range p.Evidence.Last {
		l := a.TaskID
		if why := strings.TrimSpace(a.Status + " " + a.ErrorReason); why != "" {
			l += " " + why
		}
		if a.Error != "" {
			l += ": " + redact.Clip(a.Error, 80)
		}
		last = append(last, l)
	}
	if len(last) > 3 {
		last = last[len(last)-3:]
	}
	if len(last) > 0 {
		s += "; last: " + strings.Join(last, ", ")
	}
	until := fmtLocal(doc.FormatTime(p.Until))
	switch {
	case p.Kind == parks.Item:
		s += "; its window ends " + until
	case p.Canary != "":
		s += "; canary " + p.Canary + " runs"
	default:
		s += "; one canary after " + until
	}
	unpark := "start unpark " + p.Name
	if p.Kind == parks.Item {
		unpark = "start unpark item " + p.Name
	}
	return s + "; `" + unpark + "` lifts it"
}

// line is the verdict as one line of the table.
func (v Verdict) line() string {
	word := map[int]string{VerdictOK: "OK", VerdictDegraded: "DEGRADED", VerdictDown: "DOWN", VerdictUnknown: "UNKNOWN"}[v.Exit]
	if len(v.Problems) == 0 {
		return word + "  (every role up, resources green)"
	}
	ps := make([]string, len(v.Problems))
	for i, p := range v.Problems {
		ps[i] = p.String()
	}
	return word + "  (" + strings.Join(ps, "; ") + ")"
}
