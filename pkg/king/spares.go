package king

import (
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// useSpares makes the king's queue writes recycle the inodes it frees
// (queue.Spares, issue #17): a dispatched event's pending copy and the
// copies its own rewrites replace (a completed event's status, a finished
// task's) become the files of its next writes instead of being freed, so
// most of its writes skip the disk's dear inode allocation. The pool is
// state/king/spare/. Without it (another filesystem under queue/), the
// king writes plain new files as before.
func (k *King) useSpares() {
	dir := k.l.SpareDir(layout.RoleKing)
	sp, err := queue.NewSpares(dir, k.l.QueueState(layout.QEvents, layout.Pending),
		k.l.QueueState(layout.QTasks, layout.Pending), k.l.QueueState(layout.QMessages, layout.Pending))
	if err != nil {
		k.log.Warn("no spare inodes; writing new files", "err", err)
		return
	}
	// A pending event's copy, once dispatched, is read by no one who acts
	// on more than its (gone) name: the next batch may reuse it at once.
	// A task's or message's removed file rests, as its general or the
	// envoy may be reading it.
	k.spares = sp
	k.events.UseSpares(sp, 0)
	k.tasks.UseSpares(sp, queue.MinSpareAge)
	k.msgs.UseSpares(sp, queue.MinSpareAge)
}
