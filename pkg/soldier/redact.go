package soldier

import (
	"io"

	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// What the agent prints and returns passes the one redactor (SPEC §10.14)
// before it reaches disk.

// redactedLog wraps a session-log file (logs/sessions/<soldier>.json|.err)
// so every line is redacted; the returned close flushes a last partial line.
func redactedLog(f io.Writer) (io.Writer, func() error) {
	w := redact.NewWriter(f)
	return w, w.Close
}

// redactRaw redacts every string of a raw result before it is published.
func redactRaw(raw map[string]any) map[string]any {
	redact.Value(raw)
	return raw
}
