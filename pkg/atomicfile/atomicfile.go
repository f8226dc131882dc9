// Package atomicfile writes files so that readers only ever see them whole
// and a crash never loses one that was reported written: a dot-prefixed
// temp in the same directory, fsync, rename, directory fsync (SPEC §3.1,
// §11.1). WriteFile writes one file that way; Group writes several with one
// commit. It also provides the no-replace create and rename that make put-once and
// claims exclusive (SPEC §9.3), and the sweeps for leftover temps (§9.31).
// ReadLimited reads a bounded regular file, never through a symlink or a
// FIFO. WritePrivate writes in place, only for a file no other process
// reads while it is written and that need not survive a crash.
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/ids"
)

// TempPrefix starts every temp file name.
const TempPrefix = ".tmp-"

// ErrExists is returned by the no-replace operations when the target exists.
var ErrExists = errors.New("already exists")

var role = "kingdom"

// SetRole names the role used in temp names (.tmp-<role>-<pid>-<rand>).
func SetRole(r string) {
	if r != "" {
		role = strings.ReplaceAll(r, "-", "_")
	}
}

func tempName(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("%s%s-%d-%s", TempPrefix, role, os.Getpid(), ids.Rand(6)))
}

// writeTemp writes data into a fresh temp file in dir, fsyncs it and returns
// its path.
func writeTemp(dir string, data []byte, perm os.FileMode) (string, error) {
	tmp := tempName(dir)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// WriteFile atomically replaces path with data (mode perm, normally 0600).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, data, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// WriteJSON marshals v (indented) and writes it atomically with mode 0600.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'), 0o600)
}

// CreateNoReplace atomically creates path with data unless it exists; then it
// returns an error wrapping ErrExists and leaves the existing file untouched.
// The temp is moved into place with a no-replace rename, so the moment the
// file becomes visible no temp remains: a writer killed right after (a
// watcher reacting to the new file) leaves nothing behind.
func CreateNoReplace(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, data, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := RenameNoReplace(tmp, path); err != nil {
		os.Remove(tmp)
		if errors.Is(err, ErrExists) {
			return fmt.Errorf("create %s: %w", path, ErrExists)
		}
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// RenameNoReplace renames oldPath to newPath unless newPath exists (then
// ErrExists). A missing oldPath returns an error satisfying fs.ErrNotExist.
func RenameNoReplace(oldPath, newPath string) error {
	if err := renameNoReplace(oldPath, newPath); err != nil {
		return err
	}
	syncDir(filepath.Dir(newPath))
	return nil
}

// renameNoReplace is RenameNoReplace without the directory fsync (Group
// syncs each directory once per commit).
func renameNoReplace(oldPath, newPath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldPath, unix.AT_FDCWD, newPath, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: ErrExists}
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		// Filesystem without renameat2 flags: link+unlink gives the same
		// no-replace guarantee for regular files.
		if lerr := os.Link(oldPath, newPath); lerr != nil {
			if errors.Is(lerr, fs.ErrExist) {
				return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: ErrExists}
			}
			return lerr
		}
		if rerr := os.Remove(oldPath); rerr != nil {
			// Somebody else removed the source after our link: they claimed
			// it first, so undo ours.
			os.Remove(newPath)
			return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: syscall.ENOENT}
		}
		return nil
	}
	return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: err}
}

// Touch sets path's mtime to now, creating it (0600) if missing.
func Touch(path string) error {
	now := time.Now()
	if err := os.Chtimes(path, now, now); err == nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// IsTemp reports whether name (a base name) is a dot-file readers ignore.
func IsTemp(name string) bool { return strings.HasPrefix(name, ".") }

// SweepDeadPidTemps removes temps in dir named for role whose pid is not a
// live process (SPEC §9.31: a role sweeps its own dead temps at start).
func SweepDeadPidTemps(dir, roleName string) (int, error) {
	prefix := TempPrefix + strings.ReplaceAll(roleName, "-", "_") + "-"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		rest := strings.TrimPrefix(name, prefix)
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pidAlive(pid) {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			n++
		}
	}
	return n, nil
}

// SweepOldTemps removes temps in dir older than age (any role).
func SweepOldTemps(dir string, age time.Duration, now time.Time) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), TempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if now.Sub(info.ModTime()) > age {
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				n++
			}
		}
	}
	return n, nil
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// SyncDir fsyncs a directory, making the renames and removals in it
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
