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
	b, err := k.events.Read(layout.Completed, id)
	if err != nil {
		return
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	doc["status"] = schema.EventCompleted
	if discarded != "" {
		doc["discarded"] = discarded
	}
	if err := k.events.Put(layout.Completed, id, doc); err != nil {
		k.log.Warn("mark event completed", "event", id, "err", err)
	}
}
