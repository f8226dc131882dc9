package queue

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

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

// freshDir returns dir-fresh, placing it when it is new (placeFresh).
func freshDir(dir string) (string, error) {
	sub := filepath.Clean(dir) + freshSuffix
	if fi, err := os.Lstat(sub); err == nil {
		if !fi.IsDir() {
			return "", &os.PathError{Op: "spares", Path: sub, Err: errors.New("not a directory")}
		}
		return sub, nil
	}
	perr := placeFresh(sub)
	// Another process of the role (a standby) may have placed it first.
	if fi, err := os.Lstat(sub); err != nil || !fi.IsDir() {
		if perr == nil {
			perr = errors.New("not a directory")
		}
		return "", &os.PathError{Op: "spares", Path: sub, Err: perr}
	}
	return sub, nil
}

// freshTries bounds the placements tried; freshGood is a create cost that
// skips no recently freed inode (a create costs ~35 µs on this disk then).
const (
	freshTries = 4
	freshGood  = 100 * time.Microsecond
)

// placeFresh makes sub (0700) under a parent flagged top-directory. The
// kernel puts such a directory in the flex group with the fewest
// directories among those with the most free inodes, which is also where
// a mass delete just freed them: its creates would skip those inodes for a
// minute. So each candidate is made under a dot-name and one file is
// created in it, timed; the first whose create costs under freshGood (else
// the cheapest of freshTries, each try making the kernel look elsewhere)
// is renamed to sub; the probes and the other candidates are removed (a
// handful of frees, once per pool).
func placeFresh(sub string) error {
	parent := filepath.Dir(sub)
	setTopDir(parent)
	prefix := filepath.Join(parent, ".try-"+filepath.Base(sub)+"-")
	if old, _ := filepath.Glob(prefix + "*"); len(old) > 0 {
		for _, o := range old { // a killed placement's leftovers
			os.RemoveAll(o)
		}
	}
	best, bestCost := -1, time.Duration(0)
	var cands []string
	for i := 0; i < freshTries; i++ {
		c := prefix + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		if err := os.Mkdir(c, 0o700); err != nil {
			break
		}
		cands = append(cands, c)
		start := time.Now()
		f, err := os.OpenFile(filepath.Join(c, "probe"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		cost := time.Since(start)
		if err != nil {
			continue
		}
		f.Close()
		if best < 0 || cost < bestCost {
			best, bestCost = i, cost
		}
		if cost < freshGood {
			break
		}
	}
	var err error
	if best < 0 {
		err = os.Mkdir(sub, 0o700)
	} else {
		err = os.Rename(cands[best], sub)
	}
	for i, c := range cands {
		if i == best && err == nil {
			os.Remove(filepath.Join(sub, "probe"))
			continue
		}
		os.RemoveAll(c)
	}
	return err
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
