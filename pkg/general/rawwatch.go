package general

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWatch wakes a soldier's watcher the moment its -raw.json is published,
// so a fast soldier is not held to the liveness poll. One inotify watch on
// state/results serves every soldier of the general (inotify instances are
// a scarce per-user resource). It asks only for names that appear
// (IN_CREATE, IN_MOVED_TO: a result is published by rename, or by link
// where renameat2 is missing): every write and heartbeat touch of every
// soldier lands in that directory too, and must not wake each general.
// Without inotify the poll still finds the result.
type rawWatch struct {
	once    sync.Once
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

// rawWatchMask is what the watch on state/results reports.
const rawWatchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// subscribeRaw returns a channel signalled when <task>-raw.json appears,
// and the function that drops the subscription. ctx is the task
// goroutines' (General.baseCtx).
func (g *General) subscribeRaw(ctx context.Context, task string) (<-chan struct{}, func()) {
	rw := &g.raw
	rw.once.Do(func() {
		rw.waiters = map[string]chan struct{}{}
		f, err := watchAppearing(g.o.Layout.ResultsDir())
		if err != nil {
			g.log.Warn("watch results dir; polling only", "err", err)
			return
		}
		go rw.loop(f)
		// The watch ends with the general (Start's context), so tests and
		// restarts never leak inotify instances.
		go func() { <-ctx.Done(); f.Close() }()
	})
	ch := make(chan struct{}, 1)
	rw.mu.Lock()
	rw.waiters[task] = ch
	rw.mu.Unlock()
	return ch, func() {
		rw.mu.Lock()
		delete(rw.waiters, task)
		rw.mu.Unlock()
	}
}

// watchAppearing returns an inotify instance watching dir for rawWatchMask;
// a non-blocking fd in an *os.File uses the runtime poller, so Close
// unblocks its reader.
func watchAppearing(dir string) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, rawWatchMask); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), "inotify"), nil
}

func (rw *rawWatch) loop(f *os.File) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				// Polling only from here on: the liveness poll finds results.
				f.Close()
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			task, ok := strings.CutSuffix(string(name), "-raw.json")
			if !ok {
				continue
			}
			rw.mu.Lock()
			ch := rw.waiters[task]
			rw.mu.Unlock()
			if ch != nil {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
}
