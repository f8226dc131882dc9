package envoy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Status rewrites without a file create (issue #17). Rewriting a message's
// status the classic way — a new temp, fsync, rename over — costs a fresh
// inode per message, and on this kind of disk an inode allocation is the
// dearest thing the envoy does (0.1–1 CPU-ms, more as directories churn;
// far more than the fsync). So the envoy keeps a pool of spare files in
// state/envoy/spares/: a rewrite writes the new content over a spare (no
// allocation: the spare already has its inode and block), fdatasyncs it,
// then swaps it with the message file in one renameat2(RENAME_EXCHANGE). A
// reader sees the old file or the new one, whole, at every instant, as with
// write-then-rename; the swap hands the message's old inode back as the next
// spare, so a running envoy allocates none after its first batch. A crash
// leaves at worst a spare half written (spares hold nothing anyone reads;
// they are overwritten before use). Where the swap is unsupported (another
// filesystem, an old kernel) the rewrite falls back to queue.Batch.
//
// This is a queue-level operation done beside the queue package, which the
// envoy may not change in this wave; queue.Batch is the place for it.

// maxSpares bounds the pool (and a wave of rewrites).
const maxSpares = 64

func sparesDir(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleEnvoy), "spares")
}

type recycler struct {
	dir    string
	pool   []string
	loaded bool
	off    bool // the swap does not work here
}

// errNoSwap means the rewrite must go another way.
var errNoSwap = errors.New("rename exchange unsupported")

// rewrite replaces the content of each paths[i] with data[i], atomically
// and durably. done[i] reports which were replaced; the others are as they
// were (errNoSwap: none can be, use another way).
func (r *recycler) rewrite(paths []string, data [][]byte) ([]bool, error) {
	done := make([]bool, len(paths))
	if r.off {
		return done, errNoSwap
	}
	if err := r.load(); err != nil {
		return done, err
	}
	var errs []error
	for lo := 0; lo < len(paths); lo += maxSpares {
		hi := min(lo+maxSpares, len(paths))
		if err := r.wave(paths[lo:hi], data[lo:hi], done[lo:hi], lo); err != nil {
			if errors.Is(err, errNoSwap) {
				return done, err
			}
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// load takes the spares a previous envoy left (any file of the directory).
func (r *recycler) load() error {
	if r.loaded {
		return nil
	}
	if err := layout.EnsureDir(r.dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	for _, de := range ents {
		p := filepath.Join(r.dir, de.Name())
		if !de.Type().IsRegular() || len(r.pool) >= maxSpares {
			os.RemoveAll(p)
			continue
		}
		r.pool = append(r.pool, p)
	}
	r.loaded = true
	return nil
}

// take returns a spare opened for writing (a new one if the pool is empty).
func (r *recycler) take() (string, *os.File, error) {
	for len(r.pool) > 0 {
		p := r.pool[len(r.pool)-1]
		r.pool = r.pool[:len(r.pool)-1]
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err == nil && ownFile(f) {
			return p, f, nil
		}
		if f != nil {
			f.Close()
		}
		os.Remove(p) // gone or unusable: drop it
	}
	p := filepath.Join(r.dir, "spare-"+ids.Rand(8))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("spare file: %w", err)
	}
	return p, f, nil
}

func (r *recycler) wave(paths []string, data [][]byte, done []bool, base int) error {
	type item struct {
		spare string
		f     *os.File
		err   error
	}
	items := make([]item, len(paths))
	var errs []error
	for i := range paths {
		p, f, err := r.take()
		if err != nil {
			items[i].err = err
			errs = append(errs, err)
			continue
		}
		items[i].spare, items[i].f = p, f
		items[i].err = overwrite(f, data[i])
	}
	syncFiles(len(items), func(i int) {
		if it := &items[i]; it.f != nil && it.err == nil {
			it.err = unix.Fdatasync(int(it.f.Fd()))
		}
	})
	for i := range items {
		it := &items[i]
		if it.f == nil {
			continue
		}
		if cerr := it.f.Close(); it.err == nil && cerr != nil {
			it.err = cerr
		}
		if it.err != nil {
			errs = append(errs, fmt.Errorf("rewrite %s: %w", paths[i], it.err))
			r.pool = append(r.pool, it.spare)
			continue
		}
		err := unix.Renameat2(unix.AT_FDCWD, it.spare, unix.AT_FDCWD, paths[i], unix.RENAME_EXCHANGE)
		r.pool = append(r.pool, it.spare) // the target's old inode, or the spare still
		switch {
		case err == nil:
			done[i] = true
			if afterRename != nil {
				afterRename(base + i)
			}
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("rewrite %s: %w", paths[i], err))
		case errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, errors.ErrUnsupported):
			r.off = true
			return fmt.Errorf("%w: %v", errNoSwap, err)
		default:
			errs = append(errs, fmt.Errorf("rewrite %s: %w", paths[i], err))
		}
	}
	return errors.Join(errs...)
}

// ownFile reports whether f is a regular file with no other name: a spare
// hard-linked elsewhere is never written through.
func ownFile(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1
}

// overwrite puts data at the start of f and cuts what was beyond it.
func overwrite(f *os.File, data []byte) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if fi.Size() > int64(len(data)) {
		return f.Truncate(int64(len(data)))
	}
	return nil
}

// syncFiles runs syncOne(0..n-1): in parallel (the disk merges the fsyncs into
// few commits), or inline for a few (goroutines would cost more than they
// save).
func syncFiles(n int, syncOne func(i int)) {
	if n < 4 {
		for i := range n {
			syncOne(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(8, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				syncOne(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
