package general

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// rawWatch wakes a soldier's watcher the moment its -raw.json is published,
// so a fast soldier is not held to the liveness poll. One inotify watch on
// state/results serves every soldier of the general (inotify instances are
// a scarce per-user resource). Without inotify the poll still finds the
// result.
type rawWatch struct {
	once    sync.Once
	mu      sync.Mutex
	waiters map[string]chan struct{}
	w       *fsnotify.Watcher
}

// subscribe returns a channel signalled when <task>-raw.json appears, and
// the function that drops the subscription.
func (g *General) subscribeRaw(task string) (<-chan struct{}, func()) {
	rw := &g.raw
	rw.once.Do(func() {
		rw.waiters = map[string]chan struct{}{}
		w, err := fsnotify.NewWatcher()
		if err != nil {
			g.log.Warn("inotify unavailable for results; polling only", "err", err)
			return
		}
		if err := w.Add(g.o.Layout.ResultsDir()); err != nil {
			w.Close()
			g.log.Warn("watch results dir; polling only", "err", err)
			return
		}
		rw.w = w
		go rw.loop()
		// The watch ends with the general (Start's context), so tests and
		// restarts never leak inotify instances.
		go func() { <-g.baseCtx().Done(); w.Close() }()
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

func (rw *rawWatch) loop() {
	for {
		select {
		case ev, ok := <-rw.w.Events:
			if !ok {
				return
			}
			task, ok := strings.CutSuffix(filepath.Base(ev.Name), "-raw.json")
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
		case _, ok := <-rw.w.Errors:
			if !ok {
				return
			}
		}
	}
}
