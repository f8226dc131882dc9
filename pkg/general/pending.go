package general

import (
	"encoding/json"
	"errors"
	"io/fs"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// pendingMine returns the pending tasks addressed to this general, ordered
// like queue.List (priority, created_at, id). A task's target never
// changes, so a file seen addressed to another general is remembered by id
// and never read again while it waits: an idle general woken by every new
// task file reads only the new ones, not the whole backlog. Unreadable or
// non-JSON files are rejected as queue.List would.
func (g *General) pendingMine() ([]queue.Entry, error) {
	ids, err := g.tasks.IDs(layout.Pending)
	if err != nil {
		return nil, err
	}
	if g.others == nil {
		g.others = map[string]bool{}
	}
	present := make(map[string]bool, len(ids))
	var out []queue.Entry
	for _, id := range ids {
		present[id] = true
		if g.others[id] {
			continue
		}
		b, err := g.tasks.Read(layout.Pending, id)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				_ = g.tasks.Reject(layout.Pending, id, err.Error())
			}
			continue
		}
		var head struct {
			TargetGeneral string `json:"target_general"`
			Priority      string `json:"priority"`
			CreatedAt     string `json:"created_at"`
		}
		if !json.Valid(b) || json.Unmarshal(b, &head) != nil {
			_ = g.tasks.Reject(layout.Pending, id, "not valid JSON")
			continue
		}
		if head.TargetGeneral != g.name {
			g.others[id] = true
			continue
		}
		e := queue.Entry{ID: id, State: layout.Pending, Path: g.tasks.Path(layout.Pending, id), Priority: head.Priority, Data: b}
		e.CreatedAt, _ = time.Parse(time.RFC3339Nano, head.CreatedAt)
		out = append(out, e)
	}
	for id := range g.others {
		if !present[id] {
			delete(g.others, id)
		}
	}
	queue.SortEntries(out)
	return out, nil
}
