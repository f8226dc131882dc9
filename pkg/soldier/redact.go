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

// errNoStaging says publishInPlace found no staging file it may reuse.
var errNoStaging = errors.New("no reusable staging file")

// publishInPlace publishes the raw result in the inode of the agent's
// staging file, already read: rewritten whole (mode 0600), synced, then
// moved to path with a no-replace rename and its directory synced — the
// guarantees of atomicfile.CreateNoReplace, without a new file and without
// freeing the staging one (on this project's disks every create scans the
// inodes freed lately, issue #17). Only a regular file of ours with no
// other link is reused (never a symlink or a hard link the agent made to
// another file); otherwise, or if it is gone, errNoStaging.
func publishInPlace(staging, path string, data []byte) error {
	f, _, ok := atomicfile.OpenOwned(staging)
	if !ok {
		return errNoStaging
	}
	werr := f.Chmod(0o600)
	if werr == nil {
		werr = f.Truncate(0)
	}
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return errNoStaging // written anew (the staging file goes with the rest)
	}
	return atomicfile.RenameNoReplace(staging, path)
}
