package king

import (
	"fmt"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// admission is one tick's view for admission control (SPEC §9.18):
//
//	accept = health_ok(h,p) ∧ token_ok(t,p,h) ∧ in_flight < max_soldiers
//
// in_flight = tasks in pending/ + in_progress/ + petitions running, less the
// pending tasks an engine pause parks (parked.go), counted once at the start
// of the tick and counted up by every admission within it.
type admission struct {
	snap     health.Snapshot
	inFlight int
	max      int
	// paused holds everything: the operator's pause (control.go) or a low
	// disk (hold.go); operator is the operator's pause alone, which the
	// generals honour too (waits.go).
	paused   *hold
	operator *hold
	money    *moneyGate // budget and engine pauses (budget.go)
	// parks says whether a general's park holds its task, or lets its
	// canary through (breaker.go); nil: no parks.
	parks func(general string) (h *hold, canary bool)
	// claim marks a parked general's canary admitted.
	claim func(general string)
}

func (k *King) admission() *admission {
	snap, err := health.Read(k.l.Resources(), k.now())
	if err != nil {
		k.log.Warn("resources.json unreadable; admitting as orange", "err", err)
	}
	n := k.tasks.Count(layout.Pending) + k.tasks.Count(layout.InProgress) + k.events.Count(layout.Petitioning)
	a := &admission{snap: snap, inFlight: n, max: k.cfg.Concurrency.MaxSoldiers, money: k.moneyGate(),
		parks: k.parkHold, claim: func(g string) { k.brk.claimed[g] = true }}
	a.inFlight -= k.parkedTasks(a.money) // parked.go
	k.applyPause(a)
	k.applyDiskHold(a)
	return a
}

// holdFor says why a task of priority for general ("" = not yet known) may
// not start now, or nil. The checks run in the order of their weight for the
// operator: a pause, the machine's health, the token status, the soldier
// slots, then money (an engine pause, the budgets). A parked general's
// park holds it after the pause; its canary, once due, is admitted when
// nothing else holds it.
func (a *admission) holdFor(priority, general string) *hold {
	if a.paused != nil {
		return a.paused
	}
	canary := false
	if a.parks != nil && general != "" {
		var h *hold
		if h, canary = a.parks(general); h != nil {
			return h
		}
	}
	if h := healthHold(a.snap, priority); h != nil {
		return h
	}
	if a.inFlight >= a.max {
		return &hold{reason: waits.MaxSoldiers,
			detail: fmt.Sprintf("%d tasks in flight, max_soldiers %d: waits for a soldier slot", a.inFlight, a.max)}
	}
	if a.money != nil {
		if h := a.money.hold(priority, general); h != nil {
			return h
		}
	}
	if canary {
		a.claim(general)
	}
	return nil
}

// healthHold is the §4.4 admission table's refusal as a hold: the health
// level with the figures that set it, or the token status.
func healthHold(s health.Snapshot, priority string) *hold {
	if health.DenyReason(s.Health, s.TokenStatus, priority) == "" {
		return nil
	}
	if health.DenyReason(s.Health, health.TokenUnknown, priority) != "" {
		admits := "nothing"
		if s.Health == health.Yellow {
			admits = "only high priority"
		}
		return &hold{reason: waits.Health, level: s.Health,
			detail: fmt.Sprintf("health %s (%s) admits %s", s.Health, healthFigures(s), admits)}
	}
	admits := "only high priority"
	if s.TokenStatus == health.TokenWarning {
		admits = "only high priority unless health is green"
	}
	figure := ""
	if s.Resources != nil && s.Resources.Tokens != nil {
		figure = fmt.Sprintf(" (today ≈ $%.2f)", finiteUSD(s.Resources.Tokens.DailyCostUSD))
	}
	return &hold{reason: waits.Budget, level: "tokens-" + s.TokenStatus,
		detail: fmt.Sprintf("token budget %s%s admits %s", s.TokenStatus, figure, admits)}
}

// healthFigures names what the health level rests on: the chamberlain's
// cpu and memory figures, or why there are none (a stale or broken file).
func healthFigures(s health.Snapshot) string {
	if s.Resources == nil || s.Stale || s.Invalid {
		return strings.TrimSpace(s.Reason)
	}
	sys := s.Resources.System
	return fmt.Sprintf("cpu %.0f%%, memory %.0f%%", sys.CPUPercent, sys.MemoryPercent)
}
