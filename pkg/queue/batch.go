package queue

import (
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// Batch group-commits queue writes across queues (atomicfile.Group): Put,
// Replace, PutOnce and Create stage files; Commit fsyncs their temps in
// parallel, renames them into place in order and fsyncs each directory
// once. A caller marks its inputs done (the Move or Remove of what it
// consumed) only after Commit returns, so a crash anywhere loses nothing:
//
//	b := queue.NewBatch()
//	for _, ev := range evs { b.Put(events, layout.Dispatched, ev.ID, data[ev.ID]) }
//	if err := b.Commit(); err != nil { ... }   // all durable now
//	for _, ev := range evs { events.Remove(layout.Pending, ev.ID) }
type Batch struct {
	g     atomicfile.Group
	paths map[string]bool // kind/id staged by a create, refused a second time
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{paths: map[string]bool{}} }

// Staged is one file of a batch; Err reports its outcome after Commit.
type Staged struct {
	q     *Queue
	id    string
	state string
	it    *atomicfile.GroupItem
	err   error
}

// Err is nil when the file was written, an error wrapping ErrExists when a
// create's id was already there (checked when staged and again by the
// no-replace rename at Commit).
func (s *Staged) Err() error {
	if s.err != nil {
		return s.err
	}
	if s.it == nil {
		return nil
	}
	if errors.Is(s.it.Err, atomicfile.ErrExists) {
		return fmt.Errorf("put %s %s: %w in %s", s.q.kind, s.id, ErrExists, s.state)
	}
	return s.it.Err
}

// Len returns the number of files staged.
func (b *Batch) Len() int { return b.g.Len() }

// AfterRename runs fn after the i-th rename of Commit (tests: crash points).
func (b *Batch) AfterRename(fn func(i int)) { b.g.AfterRename = fn }

// stage encodes v and stages it as state/<id>.json of q; noReplace makes
// its rename refuse an existing file.
func (b *Batch) stage(q *Queue, state, id string, v any, noReplace bool) (*atomicfile.GroupItem, error) {
	data, err := encode(v)
	if err != nil {
		return nil, fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return b.g.Write(q.Path(state, id), data, 0o600, noReplace)
}

// Put stages v as state/<id>.json of q, replacing any file there at Commit
// (like Queue.Put).
func (b *Batch) Put(q *Queue, state, id string, v any) error {
	_, err := b.Replace(q, state, id, v)
	return err
}

// Replace is Put that reports the file's own outcome after Commit
// (Staged.Err), for a caller that acts on each file of a batch.
func (b *Batch) Replace(q *Queue, state, id string, v any) (*Staged, error) {
	if err := q.checkBatch(state, id); err != nil {
		return nil, err
	}
	it, err := b.stage(q, state, id, v, false)
	if err != nil {
		return nil, err
	}
	return &Staged{q: q, id: id, state: state, it: it}, nil
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
	if err := q.checkBatch(state, id); err != nil {
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
	it, err := b.stage(q, state, id, v, true)
	if err != nil {
		return nil, err
	}
	b.paths[key] = true
	s.it = it
	return s, nil
}

// Commit makes every staged file visible and durable. On an error some
// files may be in place (each whole); the caller retries what it did not
// mark done, which the deterministic names make idempotent.
func (b *Batch) Commit() error {
	b.paths = map[string]bool{}
	return b.g.Commit()
}

// CommitSteps is Commit with steps between the renames
// (atomicfile.Group.CommitSteps): steps[i] run before the i-th staged
// file's rename, once the earlier renames are durable.
func (b *Batch) CommitSteps(steps map[int][]func() error) error {
	b.paths = map[string]bool{}
	return b.g.CommitSteps(steps)
}

// checkBatch checks a staged write: a batch is of files only.
func (q *Queue) checkBatch(state, id string) error {
	if q.st != nil {
		return fmt.Errorf("batch %s %s: the queue is on a store (use Group)", q.kind, id)
	}
	return q.checkPut(state, id)
}

// Abort drops every staged file.
func (b *Batch) Abort() {
	b.paths = map[string]bool{}
	b.g.Abort()
}
