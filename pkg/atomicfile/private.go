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

// Replace replaces path with data through a temp and a rename, like
// WriteFile, so a reader always sees the old version or the new one whole
// and a crash of the writer leaves one of them — but without either fsync,
// so a power loss may lose the write. It is for small files other
// processes read whose content a reboot makes worthless or rebuilds from
// elsewhere: the session registry (SPEC §9.12, rebuilt from the soldier-id
// files; a reboot ends every soldier it lists) and a soldier's own id,
// written as it starts (after a crash the soldier is gone, and the file's
// absence means the same as its content). Each fsync costs about half a
// CPU-millisecond here (issue #17).
func Replace(path string, data []byte, perm os.FileMode) error {
	tmp := tempName(filepath.Dir(path))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
