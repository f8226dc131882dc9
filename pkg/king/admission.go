package king

import (
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
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
	paused   string // why nothing is admitted ("" unless paused, control.go)
	// money: budget and engine pauses (budget.go); moneyReason is the
	// last refusal's reason.
	money       *moneyGate
	moneyReason string
}

func (k *King) admission() *admission {
	snap, err := health.Read(k.l.Resources(), k.now())
	if err != nil {
		k.log.Warn("resources.json unreadable; admitting as orange", "err", err)
	}
	n := k.tasks.Count(layout.Pending) + k.tasks.Count(layout.InProgress) + k.events.Count(layout.Petitioning)
	a := &admission{snap: snap, inFlight: n, max: k.cfg.Concurrency.MaxSoldiers, money: k.moneyGate()}
	a.inFlight -= k.parkedTasks(a.money) // parked.go
	k.applyPause(a)
	k.applyDiskHold(a)
	return a
}

func (a *admission) accept(priority string) bool {
	return a.paused == "" && a.snap.Admit(priority) && a.inFlight < a.max
}

func (a *admission) denyReason(priority string) string {
	if a.paused != "" {
		return a.paused
	}
	if r := health.DenyReason(a.snap.Health, a.snap.TokenStatus, priority); r != "" {
		if a.snap.Reason != "" {
			r += " (" + a.snap.Reason + ")"
		}
		return r
	}
	if a.inFlight >= a.max {
		return fmt.Sprintf("%d tasks in flight, max_soldiers %d", a.inFlight, a.max)
	}
	return a.moneyReason
}
