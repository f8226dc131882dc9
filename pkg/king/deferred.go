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
)

// Deferred events cost nothing until something that could admit them
// changes (issue #17). An event processPending deferred is remembered by
// id together with the admission state at the end of that walk
// (admissionKey). While the next
// tick starts from the same state, no remembered event can be admitted —
// each was refused under a state no better than this one — so only new
// files in pending/ are read. Anything else (a result freed a slot, health
// or budget changed, the manifests changed) and the whole queue is walked
// again, as is done at least every deferredRecheck regardless.
type deferredCache struct {
	key   string
	at    time.Time
	ids   map[string]bool
	valid bool
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
func (k *King) rememberDeferred(id string) {
	if k.deferCache.ids == nil {
		k.deferCache.ids = map[string]bool{}
	}
	k.deferCache.ids[id] = true
}

// pendingEntries returns the pending events to walk this tick: all of them
// (queue.List), or — while the admission state is unchanged since the last
// walk — only those not remembered as deferred, in the same order.
func (k *King) pendingEntries(adm *admission) ([]queue.Entry, error) {
	c := &k.deferCache
	now := k.now()
	if !c.valid || c.key != k.admissionKey(adm) || now.Sub(c.at) >= deferredRecheck || now.Before(c.at) {
		c.ids, c.valid, c.at = map[string]bool{}, false, now
		return k.events.List(layout.Pending)
	}
	idl, err := k.events.IDs(layout.Pending)
	if err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(idl))
	var out []queue.Entry
	for _, id := range idl {
		present[id] = true
		if c.ids[id] {
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
