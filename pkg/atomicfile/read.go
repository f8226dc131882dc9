package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Errors of ReadLimited.
var (
	// ErrNotRegular is a FIFO, device, directory or symlink where a file
	// was expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is a file over the size limit.
	ErrTooLarge = errors.New("file too large")
)

// ReadLimited reads a regular file of at most max bytes, the counterpart
// of the writers here for a file another process (or an agent) wrote. It
// never follows a symlink and never blocks on a FIFO planted at path.
// (queue.ReadLimited, for queue files, is this read; it is here for
// processes that must not link pkg/queue and its validator.)
func ReadLimited(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("read %s: %w (symlink)", path, ErrNotRegular)
		}
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", path, ErrNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: %w (over %d bytes)", path, ErrTooLarge, max)
	}
	return b, nil
}
