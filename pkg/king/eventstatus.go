package king

import (
	"encoding/json"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// completeEvent moves event id from state from to events/completed/ with
// the file saying so: "status": "completed", and for an event no general
// took, the reason it was discarded ("discarded": "<reason>"). The
// directory is the truth; the fields are for whoever reads the file with
// cat. One transaction fenced by the king's lease; an event no longer in
// from gives an error satisfying fs.ErrNotExist.
func (k *King) completeEvent(from, id, discarded string) error {
	d := k.completedDoc(from, id, discarded)
	return k.group(func(g *queue.GroupTx) error {
		if d == nil {
			return g.Move(k.events, from, layout.Completed, id)
		}
		if err := g.Put(k.events, layout.Completed, id, d); err != nil {
			return err
		}
		return g.Remove(k.events, from, id)
	})
}

// completedDoc is event id as it is in state, with its status set to
// completed (and the reason it was discarded); nil when it cannot be read.
func (k *King) completedDoc(state, id, discarded string) map[string]any {
	b, err := k.events.Read(state, id)
	if err != nil {
		return nil
	}
	var d map[string]any
	if json.Unmarshal(b, &d) != nil {
		return nil
	}
	d["status"] = doc.EventCompleted
	if discarded != "" {
		d["discarded"] = discarded
	}
	return d
}
