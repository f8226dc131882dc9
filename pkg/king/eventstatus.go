package king

import (
	"encoding/json"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// markCompleted rewrites an event that reached events/completed/ so the file
// says so: "status": "completed", and for an event no general took, the
// reason it was discarded ("discarded": "<reason>"). The directory is the
// truth; the fields are for whoever reads the file with cat. Best effort: a
// crash between the move and this rewrite leaves the old status, nothing
// else.
func (k *King) markCompleted(id, discarded string) {
	doc := k.completedDoc(layout.Completed, id, discarded)
	if doc == nil {
		return
	}
	if err := k.events.Put(layout.Completed, id, doc); err != nil {
		k.log.Warn("mark event completed", "event", id, "err", err)
	}
}

// completedDoc is event id as it is in state, with its status set to
// completed (and the reason it was discarded); nil when it cannot be read.
func (k *King) completedDoc(state, id, discarded string) map[string]any {
	b, err := k.events.Read(state, id)
	if err != nil {
		return nil
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	doc["status"] = schema.EventCompleted
	if discarded != "" {
		doc["discarded"] = discarded
	}
	return doc
}
