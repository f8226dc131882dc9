package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
)

// RejectPath moves a file that never became a queue document (e.g.
// inbox/x.json) into rejDir with a reason file and a system.file_rejected
// event.
func RejectPath(src, rejDir, reason string, em *eventlog.Emitter) error {
	return rejectInto(src, rejDir, filepath.Base(src), reason, em)
}

func rejectInto(src, rejDir, name, reason string, em *eventlog.Emitter) error {
	if err := os.MkdirAll(rejDir, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(rejDir, name)
	if _, err := os.Lstat(dst); err == nil {
		// Keep earlier rejects: suffix a timestamp.
		dst = filepath.Join(rejDir, fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	}
	// Reason first: a crash leaves a reason without its file at worst, never
	// a rejected file without a reason.
	if err := atomicfile.WriteFile(dst+".reason", []byte(reason+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		os.Remove(dst + ".reason")
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reject %s: %w", src, err)
	}
	em.Emit("system.file_rejected", map[string]any{"path": dst, "reason": reason})
	return nil
}
