package sentinel

import (
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// useSpares makes admission recycle inodes instead of creating and freeing
// them (issue #15, queue.Spares): a consumed inbox file is moved into the
// sentinel's pool (state/sentinel/spare/) instead of being unlinked, and
// every event file is written into a rested spare, so an inbox event
// neither creates nor frees an inode once the pool holds the files of
// earlier ones. On this kind of disk (ext4 without a journal) a create
// skips every inode freed in the last minute, so both halves count: the
// create it saves and the free that would make later creates dearer.
// Without a pool (another filesystem under inbox/ or queue/) the sentinel
// creates and unlinks as before.
func (s *Sentinel) useSpares() {
	l := s.o.Layout
	same := []string{l.QueueState(layout.QEvents, layout.Pending)}
	if s.inbox != nil {
		same = append(same, l.Inbox())
	}
	sp, err := queue.NewSpares(l.SpareDir(layout.RoleSentinel), same...)
	if err != nil {
		s.o.Log.Warn("no spare inodes; writing new files", "err", err)
		return
	}
	sp.SetClock(s.o.Clock.Now)
	// The sentinel only creates event files (PutOnce): nothing it writes
	// replaces a file, nothing it removes is a queue file.
	s.admit.Events.UseSpares(sp, queue.MinSpareAge)
	s.spares = sp
	if s.inbox != nil {
		s.inbox.UseSpares(sp)
	}
}

// SpareStats returns the counts of the sentinel's spare pool (zero without
// one): benchmarks and tests check that admission in the steady state
// creates and frees nothing.
func (s *Sentinel) SpareStats() queue.SpareStats {
	if s.spares == nil {
		return queue.SpareStats{}
	}
	return s.spares.Stats()
}
