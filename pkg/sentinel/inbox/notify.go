package inbox

import (
	"sync"
	"time"
)

// fileState is what inotify told us about one inbox name since the
// notifier started (SPEC §9.20).
type fileState uint8

const (
	// stateUnknown: no history (the file predates the notifier, the kernel
	// queue overflowed, or inotify is unavailable): the age rule applies.
	stateUnknown fileState = iota
	// stateWriting: created or modified and not closed since: a writer
	// still holds it open, so it waits for the close.
	stateWriting
	// stateComplete: its writer closed it (IN_CLOSE_WRITE) or it arrived by
	// rename (IN_MOVED_TO): taken at once.
	stateComplete
)

// DefaultStallAge is how long a file seen opened for writing but never
// closed (a hard link, a writer that hung) waits, unchanged, before it is
// read anyway.
const DefaultStallAge = time.Minute

// tracker records the inotify state of inbox names. The notifier goroutine
// writes it; Fetch reads it.
type tracker struct {
	mu      sync.Mutex
	running bool
	files   map[string]fileState
}

func newTracker() *tracker { return &tracker{files: map[string]fileState{}} }

func (t *tracker) state(name string) fileState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running {
		return stateUnknown
	}
	return t.files[name]
}

func (t *tracker) set(name string, s fileState) {
	t.mu.Lock()
	t.files[name] = s
	t.mu.Unlock()
}

func (t *tracker) forget(name string) {
	t.mu.Lock()
	delete(t.files, name)
	t.mu.Unlock()
}

// reset forgets everything (queue overflow) and sets whether the notifier
// runs.
func (t *tracker) reset(running bool) {
	t.mu.Lock()
	t.files = map[string]fileState{}
	t.running = running
	t.mu.Unlock()
}
