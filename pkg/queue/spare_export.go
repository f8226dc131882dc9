package queue

import (
	"time"
)

// Keep moves the file at path (any regular file of the pool's filesystem,
// not only a queue file: the sentinel's consumed inbox files) into the pool
// instead of unlinking it; it rests rest (at most MinSpareAge) before it
// carries a write. Call it where the file would be removed, once nothing
// needs its content: the inode is rewritten later, so its name goes first.
// It reports false, nothing moved, when the pool is full or the rename
// failed: the caller then removes the file as before. A missing path
// counts as kept.
func (s *Spares) Keep(path string, rest time.Duration) (bool, error) {
	return s.keep(path, min(rest, MinSpareAge))
}

// SetClock sets the clock a file's rest is measured by (default time.Now;
// a role passes its injected clock).
func (s *Spares) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SpareStats counts a pool's inodes: Reused files written into a spare,
// Created files created for want of a rested spare (CreateTime: the
// creates' wall time, what the disk's recent deletes make them cost), Kept
// files moved into the pool instead of being freed, Freed files the pool
// unlinked (full, or unfit to reuse).
type SpareStats struct {
	Reused, Created, Kept, Freed int64
	CreateTime                   time.Duration
}

// Stats returns the pool's counts since it was opened.
func (s *Spares) Stats() SpareStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
