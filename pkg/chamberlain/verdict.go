package chamberlain

import (
	"fmt"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Exit codes of chamberlain --once (SPEC §10.12).
const (
	VerdictOK       = 0 // all well
	VerdictDegraded = 1 // yellow/orange health, or a general down
	VerdictDown     = 2 // red health, or sentinel, king, envoy or chamberlain down
	VerdictUnknown  = 3 // cannot evaluate (no base dir, bad config, no metrics)
)

// coreRoles are the roles whose absence stops the kingdom. The chamberlain
// is one of them: without it resources.json goes stale, and the king treats
// a resources.json older than 120 s as orange and admits no new task — the
// kingdom is as stopped as without a king.
var coreRoles = map[string]bool{
	layout.RoleSentinel: true, layout.RoleKing: true, layout.RoleEnvoy: true, layout.RoleChamberlain: true,
}

// Verdict is the judgement of the whole kingdom: resource health and every
// role `start` should run (sentinel, king, envoy, chamberlain and one
// general per installed manifest).
type Verdict struct {
	Code int
	// Problems names each reason the code is not 0, e.g. "king down (no
	// tmux session)".
	Problems []string
}

// RoleDown says why a role counts as down, or "" when it is up: no live
// tmux session, or a heartbeat older than the threshold (a heartbeat older
// than the session counts from the session's start, SPEC §9.14).
func (rep *Report) RoleDown(ro RoleStatus) string {
	switch {
	case !ro.Session && rep.TmuxErr == nil:
		return "no tmux session"
	case ro.State == RoleNotStarted && !ro.Session:
		return "never started"
	case ro.State == RoleDead:
		return "heartbeat " + fmtAge(ro.Age) + " old"
	}
	return ""
}

// Verdict computes chamberlain --once's exit code and the problems behind it.
func (rep *Report) Verdict() Verdict {
	v := Verdict{}
	raise := func(code int, problem string) {
		if code > v.Code {
			v.Code = code
		}
		v.Problems = append(v.Problems, problem)
	}
	if rep == nil {
		return Verdict{Code: VerdictUnknown, Problems: []string{"no report"}}
	}
	if rep.ConfigErr != nil {
		raise(VerdictUnknown, "cannot evaluate: "+rep.ConfigErr.Error())
	}
	if rep.MetricsErr != nil || rep.Health == "" {
		raise(VerdictUnknown, fmt.Sprintf("cannot evaluate resources: %v", rep.MetricsErr))
	} else {
		switch rep.Health {
		case Red:
			raise(VerdictDown, "health red ("+rep.Reason+")")
		case Yellow, Orange:
			raise(VerdictDegraded, "health "+rep.Health+" ("+rep.Reason+")")
		}
	}
	if rep.TmuxErr != nil {
		raise(VerdictDegraded, "tmux sessions unreadable: "+rep.TmuxErr.Error())
	}
	for _, ro := range rep.Roles {
		why := rep.RoleDown(ro)
		if why == "" {
			continue
		}
		code := VerdictDegraded
		if coreRoles[ro.Name] {
			code = VerdictDown
		}
		raise(code, ro.Name+" down ("+why+")")
	}
	return v
}

// verdictLine is the verdict as one line of the table.
func (v Verdict) line() string {
	word := map[int]string{VerdictOK: "OK", VerdictDegraded: "DEGRADED", VerdictDown: "DOWN", VerdictUnknown: "UNKNOWN"}[v.Code]
	if len(v.Problems) == 0 {
		return word + "  (every role up, resources green)"
	}
	return word + "  (" + strings.Join(v.Problems, "; ") + ")"
}
