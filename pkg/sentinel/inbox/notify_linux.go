//go:build linux

package inbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotify mask of the notifier: fsnotify does not expose IN_CLOSE_WRITE, so
// the inbox reads inotify itself.
const notifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO |
	unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_ONLYDIR

// Start watches the inbox directory with inotify until ctx ends: a file
// whose writer closed it or that arrived by rename is marked complete and
// wake is called (SPEC §9.20). Without it (or when it fails) every file
// falls back to the age rule.
func (w *Watcher) Start(ctx context.Context, wake func()) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify init: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, w.cfg.Dir, notifyMask); err != nil {
		unix.Close(fd)
		return fmt.Errorf("inotify watch %s: %w", w.cfg.Dir, err)
	}
	// A non-blocking fd in an *os.File uses the runtime poller, so Close
	// unblocks the reader.
	f := os.NewFile(uintptr(fd), "inotify")
	w.track.reset(true)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go w.readEvents(f, wake)
	return nil
}

func (w *Watcher) readEvents(f *os.File, wake func()) {
	defer w.track.reset(false)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.cfg.Log.Warn("inbox: inotify read failed; falling back to the age rule", "err", err)
			}
			return
		}
		woke := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := cString(nameBytes)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				w.track.reset(true)
				woke = true
				continue
			case ev.Mask&unix.IN_IGNORED != 0:
				w.cfg.Log.Warn("inbox: inotify watch removed; falling back to the age rule")
				return
			case name == "" || !Match(name):
				continue
			case ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO) != 0:
				w.track.set(name, stateComplete)
				woke = true
			case ev.Mask&(unix.IN_CREATE|unix.IN_MODIFY) != 0:
				w.track.set(name, stateWriting)
			case ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
				w.track.forget(name)
			}
		}
		if woke && wake != nil {
			wake()
		}
	}
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
