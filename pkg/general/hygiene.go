package general

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Base clones are private (dirs 0700, files 0600, 0700 when executable),
// and a task dir's removal is verified on disk rather than assumed.

// cloneSharedMode makes git create the clone's own files (objects, refs,
// index) 0600 from the clone on, whatever the process umask.
const cloneSharedMode = "core.sharedRepository=0600"

// tightenModes makes every directory under root 0700 and every regular file
// 0600 (0700 if it was executable). Symlinks are left alone.
func tightenModes(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		switch {
		case d.IsDir():
			return os.Chmod(p, 0o700)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			mode := os.FileMode(0o600)
			if fi.Mode()&0o111 != 0 {
				mode = 0o700
			}
			if fi.Mode().Perm() != mode {
				return os.Chmod(p, mode)
			}
		}
		return nil
	})
}

// removeTree deletes path and verifies it is gone. An agent may leave
// read-only directories behind (a module cache, chmod -w): on a first
// failure every directory is made writable and the removal retried.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(path)
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: still on disk after removal", path)
	}
	return nil
}
