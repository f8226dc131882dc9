package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReplaceSwap replaces path with data like Replace (no fsync; a reader
// sees the old version or the new one whole, and a crash of the writer
// leaves one of them), but without creating or freeing an inode: the data
// is written into sibling, a file kept beside path for this, which then
// trades places with path in one renameat2(RENAME_EXCHANGE). The old
// version stays under sibling's name and is rewritten by the next call.
// On this kind of disk (ext4 without a journal) every create scans past
// the inodes freed in the last minute, so a registry rewritten twice per
// task costs two creates and two frees less per task (issue #17).
//
// The caller must hold a lock that serialises writers AND that every
// reader of path takes while it reads (a shared flock will do): a reader
// that opened path without it could still be reading the old inode when
// the next call rewrites it as sibling. Sibling must be on path's
// filesystem and named so no sweep removes it.
//
// Where the filesystem has no RENAME_EXCHANGE (or path is missing) it
// falls back to a plain rename of sibling onto path.
func ReplaceSwap(path, sibling string, data []byte, perm os.FileMode) error {
	if err := writeSibling(sibling, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err := unix.Renameat2(unix.AT_FDCWD, sibling, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	if err == nil {
		return nil
	}
	// ENOENT: path does not exist yet (the first write); EINVAL/ENOSYS: no
	// exchange here. A rename gives the same whole-or-nothing view.
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if err := os.Rename(sibling, path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("write %s: exchange: %w", path, err)
}

// writeSibling rewrites sibling in place with data (over the old bytes,
// the tail cut), creating it only when it is missing. It never writes through a symlink or into an inode with
// another name (a hard link planted there, or a crash's leftover): such a
// sibling is removed and made anew.
func writeSibling(sibling string, data []byte, perm os.FileMode) error {
	f, size, err := openOwn(sibling, perm)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && size > int64(len(data)) {
		err = f.Truncate(int64(len(data))) // cut the old tail; the blocks stay
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openOwn opens path for writing in place: an existing regular file with
// one name, of this user, or else a fresh one (anything else at path is
// removed first). It returns the file's current size.
func openOwn(path string, perm os.FileMode) (*os.File, int64, error) {
	if f, size, ok := OpenOwned(path); ok {
		if err := f.Chmod(perm.Perm()); err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, size, nil
	}
	// A symlink (ELOOP), a fifo, a second name, another owner: not ours
	// to write into.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, 0, err
	}
	return f, 0, nil
}

// WriteInPlace writes path in place like WritePrivate, but reuses the inode
// already there instead of truncating it to nothing first: the data goes
// over the old bytes and the tail is cut, so a small file keeps its block
// and nothing is freed or allocated. An entry at path that is not a
// regular file of this user with one name (a symlink, a hard link an agent
// planted) is removed and written anew, never written through. Like
// WritePrivate it is for files no other process reads while they are
// written and that need not survive a crash.
func WriteInPlace(path string, data []byte, perm os.FileMode) error {
	if err := writeSibling(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// OpenOwned opens an existing path for writing in place when it is a
// regular file of this user with no other name: never a symlink (it is not
// followed), a fifo, or an inode an agent linked elsewhere. It returns the
// file and its size, or ok false (missing, or not ours to write into).
func OpenOwned(path string) (f *os.File, size int64, ok bool) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
		st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, 0, false
	}
	return f, st.Size, true
}
