package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// Install copies the files of fsys (normally the embedded defaults,
// configfiles.FS) into dst, creating only files that do not exist yet:
// an operator's edits are never overwritten. Directories are created 0700
// and files 0600; dot-files in fsys are skipped. It returns the paths it
// created.
func Install(fsys fs.FS, dst string) ([]string, error) {
	var created []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(path.Base(p), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		if d.IsDir() {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return fmt.Errorf("install %s: %w", target, err)
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if _, err := os.Lstat(target); err == nil {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("install %s: %w", target, err)
		}
		// No-replace create: a file that appeared meanwhile is kept too.
		switch err := atomicfile.CreateNoReplace(target, data, 0o600); {
		case errors.Is(err, atomicfile.ErrExists):
			return nil
		case err != nil:
			return fmt.Errorf("install defaults: %w", err)
		}
		created = append(created, target)
		return nil
	})
	return created, err
}
