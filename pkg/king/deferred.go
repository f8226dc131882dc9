package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Deferred events cost nothing until something that could admit them
// changes (issue #17). An event processPending deferred is remembered by
// id, with its priority and age (so the walk's order needs no read), and
// with the admission state at the end of that walk (admissionKey). A
// remembered event is not read again while the next walk starts from the
// same state — each was refused under a state no better than this one —
// nor while there is no room at all (max_soldiers reached, or paused): it
// could only be deferred again. Otherwise (a result freed a slot, health
// or budget changed) the remembered events are read again in queue order,
// each only when the walk reaches it with room left. New files in pending/
// are always read. The whole queue is listed and read again at least every
// deferredRecheck regardless.
type deferredCache struct {
	key   string
	at    time.Time
	ids   map[string]deferredHead
	valid bool
}

// deferredHead is what ordering a remembered event needs.
type deferredHead struct {
	priority string
	created  time.Time
}

// deferredRecheck bounds how long remembered deferrals are trusted.
const deferredRecheck = 30 * time.Second

// admissionKey is what admission depends on: health, token status, tasks
// in flight, max_soldiers, manifests, the operator's pause, today's spend
// and which engine pauses are active now (one expiring changes the key).
func (k *King) admissionKey(adm *admission) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%d|%d|%s|%v|%s", adm.snap.Health, adm.snap.TokenStatus, adm.inFlight, adm.max, k.mfSig,
		adm.snap.Missing || adm.snap.Invalid || adm.snap.Stale, adm.paused)
	if g := adm.money; g != nil {
		fmt.Fprintf(&b, "|%s|%g|%g|%d|%v|%v", g.status.Date, g.status.Ratio, g.status.CostUSD, g.status.Tokens, g.status.Warning, g.status.Exceeded)
		engines := make([]string, 0, len(g.pauses))
		for eng := range g.pauses {
			engines = append(engines, eng)
		}
		sort.Strings(engines)
		for _, eng := range engines {
			if _, ok := g.pauses.Active(eng, g.now); ok {
				b.WriteString("|paused:" + eng)
			}
		}
	}
	return b.String()
}

// rememberDeferred records an event deferred in this walk.
func (k *King) rememberDeferred(ev *schema.Event) {
	if k.deferCache.ids == nil {
		k.deferCache.ids = map[string]deferredHead{}
	}
	created, _ := time.Parse(time.RFC3339Nano, ev.CreatedAt)
	k.deferCache.ids[ev.ID] = deferredHead{priority: ev.Priority, created: created}
}

// pendingEntries returns the pending events to walk this tick, in queue
// order: all of them read (queue.List), or the new ones read and the
// remembered deferrals unread (Data nil: processPending reads one when it
// reaches it with room left) — none of those while the admission state is
// unchanged since the last walk or there is no room.
func (k *King) pendingEntries(adm *admission) ([]queue.Entry, error) {
	c := &k.deferCache
	now := k.now()
	if !c.valid || now.Sub(c.at) >= deferredRecheck || now.Before(c.at) {
		c.ids, c.valid, c.at = map[string]deferredHead{}, false, now
		return k.events.List(layout.Pending)
	}
	revisit := c.key != k.admissionKey(adm) && adm.room()
	idl, err := k.events.IDs(layout.Pending)
	if err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(idl))
	var out []queue.Entry
	for _, id := range idl {
		present[id] = true
		if h, ok := c.ids[id]; ok {
			if revisit {
				out = append(out, queue.Entry{ID: id, State: layout.Pending, Path: k.events.Path(layout.Pending, id),
					Priority: h.priority, CreatedAt: h.created})
			}
			continue
		}
		b, err := k.events.Read(layout.Pending, id)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				// Unreadable: the full walk rejects it as List does.
				c.valid = false
				return k.events.List(layout.Pending)
			}
			continue
		}
		var h struct {
			Priority  string `json:"priority"`
			CreatedAt string `json:"created_at"`
		}
		if !json.Valid(b) || json.Unmarshal(b, &h) != nil {
			c.valid = false
			return k.events.List(layout.Pending)
		}
		e := queue.Entry{ID: id, State: layout.Pending, Path: k.events.Path(layout.Pending, id), Priority: h.Priority, Data: b}
		e.CreatedAt, _ = time.Parse(time.RFC3339Nano, h.CreatedAt)
		out = append(out, e)
	}
	for id := range c.ids {
		if !present[id] {
			delete(c.ids, id)
		}
	}
	queue.SortEntries(out)
	return out, nil
}

// endPendingWalk records the admission state the remembered deferrals hold
// under.
func (k *King) endPendingWalk(adm *admission, failed bool) {
	c := &k.deferCache
	if failed {
		c.valid = false
		return
	}
	if !c.valid {
		c.at = k.now()
	}
	c.key, c.valid = k.admissionKey(adm), true
}
