package queue

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// Batch group-commits queue writes (issue #15), across queues: Put and
// PutOnce stage files; Commit fsyncs their temps in parallel, renames them
// into place in order and fsyncs each directory once. A caller marks its
// inputs done (the Move or Remove of what it consumed) only after Commit
// returns, so a crash anywhere loses nothing:
//
//	b := queue.NewBatch()
//	for _, ev := range evs { b.Put(events, layout.Dispatched, ev.ID, data[ev.ID]) }
//	if err := b.Commit(); err != nil { ... }   // all durable now
//	for _, ev := range evs { events.Remove(layout.Pending, ev.ID) }
type Batch struct {
	g     atomicfile.Group
	paths map[string]bool
	// Files of queues that use spares (spare.go) are staged into recycled
	// inodes; n counts every staged file, gidx maps the Group's own index
	// to it (AfterRename sees one order).
	spare []*spareItem
	sidx  []int
	gidx  []int
	n     int
	after func(i int)
	// deferDirs: Commit leaves the recycled files' directories unsynced.
	deferDirs bool
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{paths: map[string]bool{}} }

// write stages data for path through q's spares or the Group.
func (b *Batch) write(q *Queue, path string, data []byte, mode placeMode) (*atomicfile.GroupItem, *spareItem, error) {
	if q.spares != nil {
		it, err := q.spares.stage(path, data, mode, q.replacedRest)
		if err != nil {
			return nil, nil, err
		}
		b.spare = append(b.spare, it)
		b.sidx = append(b.sidx, b.n)
		b.n++
		return nil, it, nil
	}
	it, err := b.g.Write(path, data, 0o600, mode == placeCreate)
	if err != nil {
		return nil, nil, err
	}
	b.gidx = append(b.gidx, b.n)
	b.n++
	return it, nil, nil
}

// Staged is one PutOnce of a batch; Err reports its outcome after Commit.
type Staged struct {
	q     *Queue
	id    string
	state string
	it    *atomicfile.GroupItem
	sp    *spareItem
	err   error
}

// Err is nil when the file was created, an error wrapping ErrExists when
// the id was already there (checked when staged and again by the
// no-replace rename at Commit).
func (s *Staged) Err() error {
	if s.err != nil {
		return s.err
	}
	var err error
	switch {
	case s.it != nil:
		err = s.it.Err
	case s.sp != nil:
		err = s.sp.err
	}
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("put %s %s: %w in %s", s.q.kind, s.id, ErrExists, s.state)
	}
	return err
}

// Len returns the number of files staged.
func (b *Batch) Len() int { return b.g.Len() + len(b.spare) }

// AfterRename runs after the i-th rename of Commit (tests: crash points).
func (b *Batch) AfterRename(fn func(i int)) {
	b.after = fn
	b.g.AfterRename = func(i int) {
		if b.after != nil && i < len(b.gidx) {
			b.after(b.gidx[i])
		}
	}
}

// stage encodes v and stages it as state/<id>.json of q.
func (b *Batch) stage(q *Queue, state, id string, v any, mode placeMode) (*atomicfile.GroupItem, *spareItem, error) {
	data, err := encode(v)
	if err != nil {
		return nil, nil, fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return b.write(q, q.Path(state, id), data, mode)
}

// Put stages v as state/<id>.json of q, replacing any file there at Commit
// (like Queue.Put).
func (b *Batch) Put(q *Queue, state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	_, _, err := b.stage(q, state, id, v, placeReplace)
	return err
}

// Replace is Put that reports the file's own outcome after Commit
// (Staged.Err), for a caller that acts on each file of a batch.
func (b *Batch) Replace(q *Queue, state, id string, v any) (*Staged, error) {
	return b.replace(q, state, id, v, placeReplace)
}

// Rewrite is Replace for a file the caller knows is there (one it just
// read and holds, e.g. a message whose status it sets). Through q's spares
// the new version is swapped with the old in one renameat2
// (RENAME_EXCHANGE) and the old inode joins the pool (it rests as
// UseSparesRest says); a file gone meanwhile is created. Without spares it
// is Replace.
func (b *Batch) Rewrite(q *Queue, state, id string, v any) (*Staged, error) {
	return b.replace(q, state, id, v, placeRewrite)
}

func (b *Batch) replace(q *Queue, state, id string, v any, mode placeMode) (*Staged, error) {
	if err := q.checkPut(state, id); err != nil {
		return nil, err
	}
	it, sp, err := b.stage(q, state, id, v, mode)
	if err != nil {
		return nil, err
	}
	return &Staged{q: q, id: id, state: state, it: it, sp: sp}, nil
}

// PutOnce stages state/<id>.json of q unless id is in any of q's states or
// already staged in this batch (like Queue.PutOnce). The returned Staged
// reports ErrExists at once or, for a file created meanwhile, after Commit.
func (b *Batch) PutOnce(q *Queue, state, id string, v any) (*Staged, error) {
	return b.create(q, state, id, v, true)
}

// Create stages state/<id>.json of q with a no-replace rename, for an id
// the caller knows is new (one it just reserved, e.g. a fresh task id):
// unlike PutOnce it does not look for id in q's other states, only the
// rename refuses a file already in state. Staged.Err reports ErrExists
// after Commit.
func (b *Batch) Create(q *Queue, state, id string, v any) (*Staged, error) {
	return b.create(q, state, id, v, false)
}

// create stages a no-replace create of state/<id>.json, refused at once
// when id is staged in this batch or (lookup) in any of q's states.
func (b *Batch) create(q *Queue, state, id string, v any, lookup bool) (*Staged, error) {
	if err := q.checkPut(state, id); err != nil {
		return nil, err
	}
	s := &Staged{q: q, id: id, state: state}
	key := q.kind + "/" + id
	if b.paths[key] {
		s.err = fmt.Errorf("put %s %s: %w in this batch", q.kind, id, ErrExists)
		return s, nil
	}
	if lookup {
		if st, ok := q.Find(id); ok {
			s.err = fmt.Errorf("put %s %s: %w in %s", q.kind, id, ErrExists, st)
			return s, nil
		}
	}
	it, sp, err := b.stage(q, state, id, v, placeCreate)
	if err != nil {
		return nil, err
	}
	b.paths[key] = true
	s.it, s.sp = it, sp
	return s, nil
}

// DeferDirSync makes Commit skip the fsync of the directories its recycled
// files (those of queues with spares) were renamed into: each file's
// content is durable before its rename, but after a crash its name may hold
// the old version again, whole. It is for a caller that syncs those
// directories itself before it relies on the renames (the envoy, at its
// checkpoint, before it empties the journal that records what it did).
// Files of queues without spares are committed by the Group, which syncs
// their directories as always.
func (b *Batch) DeferDirSync() { b.deferDirs = true }

// Commit makes every staged file visible and durable (see DeferDirSync). On an error some
// files may be in place (each whole); the caller retries what it did not
// mark done, which the deterministic names make idempotent.
func (b *Batch) Commit() error {
	b.paths = map[string]bool{}
	items, idx := b.spare, b.sidx
	b.spare, b.sidx = nil, nil
	defer func() { b.gidx, b.n = nil, 0 }()
	if len(items) == 0 {
		return b.g.Commit()
	}
	// Recycled files first: sync them all, then the Group commits its own
	// (sync, renames, directories), then the recycled files are renamed in
	// order and their directories synced once each.
	if err := syncItems(items); err != nil {
		abortItems(items)
		b.g.Abort()
		return err
	}
	var errs []error
	if err := b.g.Commit(); err != nil {
		errs = append(errs, err)
	}
	dirs := map[string]bool{}
	var order []string
	var pools []*Spares
	for _, it := range items {
		if !slices.Contains(pools, it.pool) {
			pools = append(pools, it.pool)
		}
	}
	for i, it := range items {
		sp := it.pool
		if err := sp.place(it); err != nil {
			errs = append(errs, err)
		} else if it.err == nil {
			if d := filepath.Dir(it.path); !dirs[d] {
				dirs[d] = true
				order = append(order, d)
			}
		}
		if b.after != nil {
			b.after(idx[i])
		}
	}
	for _, d := range order {
		if b.deferDirs {
			break
		}
		if err := atomicfile.SyncDir(d); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, sp := range pools {
			sp.Synced(d)
		}
	}
	return errors.Join(errs...)
}

// SyncBatches makes the files staged so far in every batch durable in one
// pass (one syncfs, or one round of parallel fdatasyncs: syncfs.go) without
// making any of them visible; each batch's Commit then renames and syncs
// directories only. A caller that commits several batches in a fixed order
// (the king: dispatched copies, then tasks, then messages) pays one sync
// instead of one per batch, and every file is still durable before its
// rename. It covers the files of queues with spares; the others are synced
// by their batch's Commit as always. On an error every batch is aborted.
func SyncBatches(bs ...*Batch) error {
	var items []*spareItem
	for _, b := range bs {
		items = append(items, b.spare...)
	}
	if err := syncItems(items); err != nil {
		for _, b := range bs {
			b.Abort()
		}
		return err
	}
	return nil
}

// Abort drops every staged file.
func (b *Batch) Abort() {
	b.paths = map[string]bool{}
	abortItems(b.spare)
	b.spare, b.sidx, b.gidx, b.n = nil, nil, nil, 0
	b.g.Abort()
}
