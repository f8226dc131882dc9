package queue

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Where a pool creates its new files. On ext4 without a journal a create
// scans its block group's inode bitmap from the start, skipping every
// inode freed in the last minute, and a regular file goes to the first
// group with a free inode in its directory's flex group (16 groups): so
// every create of a tree pays for every delete anywhere near it. Measured
// here after a few thousand deletes nearby: 585–633 µs per create in a
// directory of the busy tree, 24–29 µs in one placed in a flex group of
// its own.
//
// A pool therefore creates in <pool>-fresh, a sibling directory made once
// with their parent flagged FS_TOPDIR_FL ("chattr +T": the kernel spreads
// the subdirectories of such a directory as it does top-level ones,
// Orlov). The files born there are the role's queue files and keep their
// inodes as they are renamed and recycled (a spare rests in the pool
// directory, whatever its birthplace); only their own deletes, rare (the
// pool is full, retention days later), make the pool's creates dearer.
// Where the flag cannot be set (another filesystem, no permission) the
// directory is an ordinary one: nothing is lost but the placement.
const freshSuffix = "-fresh"

// fsTopdirFL is FS_TOPDIR_FL of <linux/fs.h>.
const fsTopdirFL = 0x00020000

// freshDir returns dir-fresh, creating it (0700) under a parent flagged
// top-directory when it is new.
func freshDir(dir string) (string, error) {
	sub := filepath.Clean(dir) + freshSuffix
	if fi, err := os.Lstat(sub); err == nil {
		if !fi.IsDir() {
			return "", &os.PathError{Op: "spares", Path: sub, Err: errors.New("not a directory")}
		}
		return sub, nil
	}
	setTopDir(filepath.Dir(sub))
	if err := os.Mkdir(sub, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return sub, nil
}

// setTopDir sets FS_TOPDIR_FL on dir, best effort.
func setTopDir(dir string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	fd := int(f.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopdirFL != 0 {
		return
	}
	unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFL))
}
