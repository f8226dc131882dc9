package king

import (
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// parkedTasks counts the pending tasks an engine pause holds back: not_before
// still ahead and their general's engine paused now (SPEC §10.8). They
// start no soldier before the reset, so they hold no max_soldiers slot (a
// refinement of §9.18's in_flight, docs/ARCHITECTURE.md): three claude tasks
// waiting out a seven-day limit do not block every other engine's work.
// Pending tasks are read only while some pause is active.
func (k *King) parkedTasks(g *moneyGate) int {
	if g == nil || !anyActive(g) {
		return 0
	}
	ids, err := k.tasks.IDs(layout.Pending)
	if err != nil {
		return 0
	}
	n := 0
	for _, id := range ids {
		var t doc.Task
		if k.tasks.ReadJSON(layout.Pending, id, &t) != nil {
			continue
		}
		nb, err := doc.ParseTime(t.NotBefore)
		if err != nil || !nb.After(g.now) {
			continue
		}
		if _, paused := g.pauses.Active(k.engineOf(t.TargetGeneral), g.now); paused {
			n++
		}
	}
	return n
}

func anyActive(g *moneyGate) bool {
	for _, e := range g.pauses.Engines() {
		if _, ok := g.pauses.Active(e, g.now); ok {
			return true
		}
	}
	return false
}
