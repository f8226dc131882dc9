package chamberlain

import (
	"encoding/json"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// encodeMessage marshals m and checks it against the message schema, so the
// envoy never rejects what the chamberlain queues.
func encodeMessage(m doc.Message) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
	}
	if err := schema.Validate(doc.KindMessage, b); err != nil {
		return nil, fmt.Errorf("message %s: %w", m.ID, err)
	}
	return append(b, '\n'), nil
}
