package king

import (
	"fmt"
	"time"

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
	snap, err := k.healthSnap.read(k.l.Resources(), k.now())
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

// room reports whether anything at all could be admitted now (a slot
// free, not paused).
func (a *admission) room() bool { return a.paused == "" && a.inFlight < a.max }

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

// healthCache is the last judgement of resources.json (issue #17: a burst
// ticks many times a second; the chamberlain rewrites the file every few
// seconds). A file unchanged since (same inode, size, mtime) is judged
// again only when a second has passed, for its age.
type healthCache struct {
	stamp fileStamp // zero: nothing cached
	at    time.Time
	snap  health.Snapshot
}

func (c *healthCache) read(path string, now time.Time) (health.Snapshot, error) {
	st, ok := stampFile(path)
	if !ok {
		c.stamp = fileStamp{}
		return health.Read(path, now)
	}
	if st == c.stamp && !now.Before(c.at) && now.Sub(c.at) < time.Second {
		return c.snap, nil
	}
	snap, err := health.Read(path, now)
	if err != nil {
		c.stamp = fileStamp{}
		return snap, err
	}
	c.stamp, c.at, c.snap = st, now, snap
	return snap, nil
}
