package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileNoSync replaces path with data through a temp and a rename, like
// WriteFile, so a reader sees the old file or the new one whole, but without
// either fsync. It is for small files other processes read that need not
// survive a machine crash because their writer does not either: a soldier's
// own id, written as it starts (after a crash the soldier is gone and the
// file's absence means the same as its content). Each fsync costs a soldier
// about half a CPU-millisecond here.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
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
