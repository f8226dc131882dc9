package soldier

import (
	"errors"
	"io"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// This file holds the soldier's share of issue #13: what the agent prints
// and returns passes the one redactor (SPEC §10.14) before it reaches disk,
// and the agent's staging file does not outlive its publication.

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

// removeStaging deletes the agent's staging result once the raw result
// holds it (issue #13 item 9): it was written with the agent's umask and
// would otherwise stay forever.
func removeStaging(path string) {
	_ = os.Remove(path)
}

// errNoStaging is kept for run.go's check; publishInPlace no longer
// returns it.
var errNoStaging = errors.New("no reusable staging file")

// publishInPlace publishes the raw result as a new file (atomicfile's
// no-replace create: temp, fsync, rename, directory fsync) and removes the
// agent's staging file.
func publishInPlace(staging, path string, data []byte) error {
	err := atomicfile.CreateNoReplace(path, data, 0o600)
	removeStaging(staging)
	return err
}
