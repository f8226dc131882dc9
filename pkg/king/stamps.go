package king

import (
	"os"
	"syscall"

	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// fileStamps remembers files by version (inode, size, mtime): a file seen
// with the same stamp is the same file, unread. processResults uses it for
// the in-progress tasks it read and found no half-done retry, so a tick
// reads a waiting task once, not every tick while its soldier works.
type fileStamps map[string]fileStamp

type fileStamp struct {
	ino   uint64
	size  int64
	mtime int64
}

func stampFile(path string) (fileStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStamp{}, false
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, true
}

// has reports whether path is the version remembered.
func (s fileStamps) has(path string) bool {
	old, ok := s[path]
	if !ok {
		return false
	}
	now, ok := stampFile(path)
	return ok && now == old
}

// add remembers path's current version. The stamp is taken after the
// read: a file replaced in between has a new inode, and is read again.
func (s *fileStamps) add(path string) {
	if *s == nil {
		*s = fileStamps{}
	}
	if st, ok := stampFile(path); ok {
		(*s)[path] = st
	}
}

// keepOnly forgets the files of q's state not among ids.
func (s fileStamps) keepOnly(ids []string, q *queue.Queue, state string) {
	if len(s) == 0 {
		return
	}
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		keep[q.Path(state, id)] = true
	}
	for p := range s {
		if !keep[p] {
			delete(s, p)
		}
	}
}
