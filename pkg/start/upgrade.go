package start

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// RemoveOldLayout removes what earlier versions kept under the base dir and
// this one neither reads nor writes (layout.OldLayoutDirs, OldLayoutFiles),
// and returns the paths it removed. Earlier versions also set the
// top-directory attribute ("chattr +T") on the role state dir holding a
// spare pool, a placement hint for that pool; it is cleared from each such
// dir before the pool goes, so a run interrupted between the two still
// finds the dir to clear next time. Safe to run on every start: a tree
// without leftovers is left as it is.
func RemoveOldLayout(l layout.Layout) ([]string, error) {
	var removed []string
	var errs []error
	for _, pat := range l.OldLayoutDirs() {
		matches, err := filepath.Glob(pat)
		if err != nil {
			return removed, fmt.Errorf("remove old layout %s: %w", pat, err)
		}
		for _, p := range matches {
			if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
				continue // same name, not ours: a file, a symlink
			}
			if err := clearTopDirFlag(filepath.Dir(p)); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Errorf("remove old layout %s: %w", p, err))
				continue
			}
			removed = append(removed, p)
		}
	}
	for _, p := range l.OldLayoutFiles() {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove old layout %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// clearTopDirFlag clears FS_TOPDIR_FL (<linux/fs.h>) from dir. A filesystem
// without attribute flags has nothing to clear.
func clearTopDirFlag(dir string) error {
	const fsTopdirFL = 0x00020000
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("clear +T on %s: %w", dir, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			return nil
		}
		return fmt.Errorf("clear +T on %s: %w", dir, err)
	}
	if flags&fsTopdirFL == 0 {
		return nil
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags&^fsTopdirFL)); err != nil {
		return fmt.Errorf("clear +T on %s: %w", dir, err)
	}
	return nil
}
