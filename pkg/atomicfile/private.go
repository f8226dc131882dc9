package atomicfile

import (
	"fmt"
	"os"
	"syscall"
)

// WritePrivate writes path in place: no temp, no fsync. It is for files
// no other process reads while they are written and that need not survive
// a crash — a prompt or a workspace file written before the soldier that
// reads it is started, and rewritten on every attempt (issue #17: every
// create costs more on a disk after many deletions). A symlink at path is
// refused, not followed.
func WritePrivate(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
