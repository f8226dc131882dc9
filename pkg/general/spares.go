package general

import (
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Claim rewrites over recycled inodes (issue #17). A claimed task is
// rewritten with its status in_progress; as a new file that costs an inode
// allocation, the dearest file operation on this machine's disk (0.3–1 ms
// of kernel CPU). So the general's tasks queue writes through a pool of
// recycled inodes (queue.Spares) in state/<general>/spare/: the rewrite
// goes over a rested spare and is swapped with the claimed file in one
// renameat2(RENAME_EXCHANGE) (queue.Queue.Rewrite), whose old inode joins
// the pool. A replaced inode rests a second before reuse (the king may be
// reading an in-progress task). Where the pool cannot be opened (another
// filesystem under queue/) the general writes new files as before.

// useSpares opens the pool once, at the first claim: after the general
// took its leader lock (one writer per pool), as New does no I/O.
func (g *General) useSpares() {
	if g.sparesOpened {
		return
	}
	g.sparesOpened = true
	sp, err := queue.NewSpares(g.spareDir(), g.o.Layout.QueueState(layout.QTasks, layout.InProgress))
	if err != nil {
		g.log.Warn("no spare inodes for claim rewrites; writing new files", "err", err)
		return
	}
	g.tasks.UseSpares(sp, queue.MinSpareAge)
}

func (g *General) spareDir() string {
	return g.o.Layout.SpareDir(g.name)
}
