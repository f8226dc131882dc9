//go:build !linux

package inbox

import (
	"context"
	"errors"
)

// Start is unavailable off Linux: every file follows the age rule.
func (w *Watcher) Start(context.Context, func()) error {
	return errors.New("close-write notification needs Linux inotify")
}
