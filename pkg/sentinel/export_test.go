package sentinel

import (
	"log/slog"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
)

// NewWith builds a sentinel around the given watchers (tests, embedding).
func NewWith(o Options, ws ...watcher.Watcher) *Sentinel {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := newSentinel(o)
	for _, w := range ws {
		if in, ok := w.(*inbox.Watcher); ok {
			s.inbox = in
		}
		s.add(w)
	}
	s.loadStatus()
	return s
}
