// Package lockfile owns the advisory file locks of the kingdom: the
// single-leader lock of each role (state/<role>/leader.lock, holding the
// holder's pid, SPEC §4.2 and §9.27) and the short shared/exclusive locks that
// guard read-modify-write of shared files (sessions.lock, logs/.rotate.lock).
// Locks are flock(2): the kernel drops them when the holder dies.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"
)

// HeldError reports that another live process holds a leader lock.
type HeldError struct {
	Path string
	PID  int
}

func (e *HeldError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("leader lock %s is held by pid %d", e.Path, e.PID)
	}
	return fmt.Sprintf("leader lock %s is held by another process", e.Path)
}

// Leader is an acquired leader lock.
type Leader struct {
	path string
	fl   *flock.Flock
}

// TryLeader takes the leader lock at path without blocking. If another process
// holds it, it returns a *HeldError naming the holder's pid.
func TryLeader(path string) (*Leader, error) {
	fl := flock.New(path, flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		return nil, &HeldError{Path: path, PID: HolderPID(path)}
	}
	l := &Leader{path: path, fl: fl}
	if err := l.writePID(); err != nil {
		fl.Unlock()
		return nil, err
	}
	return l, nil
}

// WaitLeader blocks until the leader lock at path is free and takes it
// (standby mode). It polls every poll interval and returns ctx.Err() when
// ctx ends first.
func WaitLeader(ctx context.Context, path string, poll time.Duration) (*Leader, error) {
	fl := flock.New(path, flock.SetPermissions(0o600))
	ok, err := fl.TryLockContext(ctx, poll)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: not acquired", path)
	}
	l := &Leader{path: path, fl: fl}
	if err := l.writePID(); err != nil {
		fl.Unlock()
		return nil, err
	}
	return l, nil
}

func (l *Leader) writePID() error {
	// The lock is on the inode, so rewriting the content is safe; the file
	// itself is never removed or replaced (a new inode would admit a second
	// holder).
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write pid to %s: %w", l.path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		return fmt.Errorf("write pid to %s: %w", l.path, err)
	}
	return nil
}

// Release drops the lock. The pid stays in the file (it is informational;
// a reader checks the lock itself with Held).
func (l *Leader) Release() error {
	if l == nil || l.fl == nil {
		return nil
	}
	return l.fl.Close()
}

// HolderPID reads the pid recorded in a lock file (0 when unknown).
func HolderPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// Held reports whether some process currently holds the lock at path, and the
// recorded pid. It probes with a non-blocking shared lock, so it never takes
// the lock away from anyone.
func Held(path string) (bool, int) {
	f, err := os.Open(path)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, HolderPID(path)
		}
		return false, 0
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false, HolderPID(path)
}

// File is a lock file used for short critical sections.
type File struct {
	f *os.File
}

// Open opens (creating 0600) the lock file at path. Keep it for the life of
// the process and call Lock/RLock/Unlock around each critical section.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return &File{f: f}, nil
}

// Lock takes the exclusive lock, blocking.
func (l *File) Lock() error { return flockRetry(l.f, unix.LOCK_EX) }

// RLock takes the shared lock, blocking.
func (l *File) RLock() error { return flockRetry(l.f, unix.LOCK_SH) }

// Unlock releases the lock.
func (l *File) Unlock() error { return unix.Flock(int(l.f.Fd()), unix.LOCK_UN) }

// Close closes the file (releasing any lock).
func (l *File) Close() error { return l.f.Close() }

func flockRetry(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		return nil
	}
}

// With runs fn holding the exclusive lock at path (opened for this call only).
func With(path string, fn func() error) error {
	return with(path, (*File).Lock, fn)
}

// with runs fn holding the lock at path that lock takes.
func with(path string, lock func(*File) error, fn func() error) error {
	lf, err := Open(path)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := lock(lf); err != nil {
		return err
	}
	defer lf.Unlock()
	return fn()
}
