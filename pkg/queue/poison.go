package queue

import (
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Poison is a document no consumer can take: too large, failing its kind's
// schema, or whose "id" differs from its name. List and Count move every
// such document to rejected/ with its reason the moment they meet it, so
// it can neither stall a consumer nor be counted as work in flight. (The
// store rejects on its own what is no document at all: in the files store
// a name that is no safe <id>.json, a directory, FIFO or symlink, or a
// file that is not JSON.)

// poison returns why no consumer could take d, or "".
func (q *Queue) poison(d store.Doc) string {
	if int64(len(d.Data)) > q.MaxSize {
		return atomicfile.ErrTooLarge.Error()
	}
	if err := q.CheckDocument(d.ID, d.Data); err != nil {
		return err.Error()
	}
	return ""
}

// kindSchema is the document kind of each queue's files.
var kindSchema = map[string]doc.Kind{
	layout.QEvents:   doc.KindEvent,
	layout.QTasks:    doc.KindTask,
	layout.QMessages: doc.KindMessage,
}

// CheckDocument validates data as a file of this queue named id: its kind's
// schema (the same decode every consumer uses) and an "id" equal to the
// file name. It returns the reason a consumer could not take it, or nil.
func (q *Queue) CheckDocument(id string, data []byte) error {
	var got string
	switch kindSchema[q.kind] {
	case doc.KindEvent:
		ev, err := schema.DecodeEvent(data)
		if err != nil {
			return fmt.Errorf("invalid event: %w", err)
		}
		got = ev.ID
	case doc.KindTask:
		t, err := schema.DecodeTask(data)
		if err != nil {
			return fmt.Errorf("invalid task: %w", err)
		}
		got = t.ID
	case doc.KindMessage:
		m, err := schema.DecodeMessage(data)
		if err != nil {
			return fmt.Errorf("invalid message: %w", err)
		}
		got = m.ID
	default:
		return nil
	}
	if got != id {
		return fmt.Errorf("id %q does not match the file name %s.json", got, id)
	}
	return nil
}
