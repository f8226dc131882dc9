package lockfile

import (
	"errors"

	"golang.org/x/sys/unix"
)

// TryLock takes the exclusive lock without blocking; ok is false when
// another holder has it.
func (l *File) TryLock() (ok bool, err error) {
	err = flockRetry(l.f, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
