package soldier

import (
	"os"
)

// lazyLog is an append-only log file created on its first write: most
// engines write nothing to stderr, and an empty .err beside every session
// log would only say so.
type lazyLog struct {
	path string
	f    *os.File
	err  error
}

func (w *lazyLog) Write(b []byte) (int, error) {
	if w.f == nil && w.err == nil {
		w.f, w.err = os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if w.err != nil {
		return 0, w.err
	}
	return w.f.Write(b)
}

// Close closes the file if it was ever created.
func (w *lazyLog) Close() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}
