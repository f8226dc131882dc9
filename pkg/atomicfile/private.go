package atomicfile

import (
	"fmt"
	"os"
	"syscall"
)

// WritePrivate writes path in place: no temp, no fsync. It is only for a
// file no other process has open while it is written and that need not
// survive a crash: a prompt or schema written before the soldier that
// reads it is started. A symlink at path is refused, not followed.
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

// Replace is WriteFile: temp, fsync, rename, directory fsync. A reader,
// locked or not, sees the old version or the new one whole, and once it
// returns the new one survives a crash.
func Replace(path string, data []byte, perm os.FileMode) error {
	return WriteFile(path, data, perm)
}
