package envoy

import (
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Status rewrites without a file create (issue #17). Rewriting a message's
// status the classic way — a new temp, fsync, rename over — costs a fresh
// inode per message, and on this kind of disk an inode allocation is the
// dearest thing the envoy does (0.1–1 CPU-ms, more as directories churn;
// far more than the fsync). So the envoy's messages queue writes through a
// pool of recycled inodes (queue.Spares) in state/envoy/spare/: a status
// rewrite (queue.Batch.Rewrite) writes the new content over a spare,
// fdatasyncs it, then swaps it with the message file in one
// renameat2(RENAME_EXCHANGE). A reader sees the old file or the new one,
// whole, at every instant; the swap hands the message's old inode back to
// the pool, so a running envoy allocates none after its first batch.
//
// The old inode is reused at once (no rest): a message file's content is
// read by no one but the envoy, which has read it before it rewrites it
// (the king and the chamberlain only create and count message files).
// Where the pool cannot be opened (state/envoy on another filesystem than
// queue/, a full disk at the first batch) the envoy writes new files as
// before.

func sparesDir(l layout.Layout) string {
	return l.SpareDir(layout.RoleEnvoy)
}

// useSpares opens the pool once, at the first batch: after the envoy took
// its leader lock (one writer per pool), as New does no I/O.
func (e *Envoy) useSpares() {
	if e.sparesOpened {
		return
	}
	e.sparesOpened = true
	sp, err := queue.NewSpares(e.spareDir, e.messages.Dir(layout.Pending))
	if err != nil {
		e.log.Warn("no spare inodes for status rewrites; writing new files", "err", err)
		return
	}
	e.spares = sp
	e.messages.UseSparesRest(sp, 0, 0)
}
