package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
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

// Replace atomically replaces path with data, like WriteFile, but does not
// fsync: a reader always sees a whole version, and a crash of the writer
// leaves the old or the new one, but a power loss may lose the write. It is
// for state rebuilt from elsewhere after a reboot, which also ends every
// soldier (the session registry: SPEC §9.12, rebuilt from the soldier-id
// files) — two fsyncs per write fewer (issue #17).
func Replace(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := tempName(dir)
	if err := WritePrivate(tmp, data, perm); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
