package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// SyncClose makes each files[i] durable and closes it, several at once
// (the disk merges parallel syncs into few flushes): fdatasync when data
// (the file's size and blocks, enough for a file written once), else
// fsync. An error names paths[i], the file's target.
func SyncClose(files []*os.File, paths []string, data bool) error {
	one := func(i int) error {
		var err error
		if data {
			err = Fdatasync(files[i])
		} else {
			err = files[i].Sync()
		}
		if cerr := files[i].Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", paths[i], err)
		}
		return nil
	}
	if len(files) == 1 {
		return one(0)
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(syncWorkers, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := one(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// Fdatasync makes f's data (and the metadata needed to read it) durable.
func Fdatasync(f *os.File) error { return retrySync("fdatasync", f, unix.Fdatasync) }

// Syncfs writes every dirty page and inode of f's filesystem and flushes
// the disk's cache (syncfs(2)); it reports a writeback error of the
// filesystem since f was opened.
func Syncfs(f *os.File) error { return retrySync("syncfs", f, unix.Syncfs) }

// retrySync runs a sync call on f's descriptor until it is not EINTR.
func retrySync(op string, f *os.File, call func(fd int) error) error {
	for {
		err := call(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: op, Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
