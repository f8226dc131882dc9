// Package queue owns the queues of events, tasks and messages (SPEC §3.1,
// seed 003): it is the only code that writes, claims, moves or rejects
// queue documents. A Queue lives on one of two backends, chosen once when
// it is built; every role calls the same methods either way:
//
//   - files (New): queue/<kind>/<state>/<id>.json. Files are messages and
//     directories are states; a file appears whole (write-then-rename), a
//     claim is a no-replace rename, and a poison file goes to rejected/
//     with a .reason beside it so it never blocks the queue.
//   - a store (OnStore): documents in a store.Store (PostgreSQL shared by
//     every host, SPEC §11.7), where a claim also records the holder (host
//     and attempt) and a group of changes is one transaction (Group).
//
// Drive it with one Queue per kind (events, tasks, messages):
//
//	q := queue.New(layout, layout.QTasks, emitter) // or queue.OnStore(st, layout, layout.QTasks, emitter, host)
//	q.PutOnce(layout.Pending, task.ID, task)
//	entries, _ := q.List(layout.Pending)   // priority, then oldest
//	err := q.Claim(layout.Pending, layout.InProgress, id) // ErrTaken for losers
//
// External events enter only through an Admitter (admit.go), which refuses
// an id already queued or in the seen index (seen.go). List and Count move
// any poison they meet to rejected/ (poison.go). A Batch writes several
// files of any queues with one group commit (batch.go, files only); Group
// runs a dispatch's steps as one unit (group.go).
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// DefaultMaxSize is the largest queue file read (SPEC §8).
const DefaultMaxSize = 1 << 20

// The queue's errors are the store's, so a caller's errors.Is holds on
// either backend.
var (
	// ErrTaken is returned by Claim when another claimant won the file (or it
	// no longer exists in the source state).
	ErrTaken = store.ErrTaken
	// ErrExists is returned by PutOnce (and no-replace moves) when the id is
	// already present.
	ErrExists = store.ErrExists
)

// Queue is one queue kind (events, tasks or messages).
type Queue struct {
	l       layout.Layout
	kind    string
	states  []string
	em      *eventlog.Emitter
	MaxSize int64
	valid   validCache
	b       backend
	st      store.Store // nil on files
	host    string      // the claim holder on a store
}

// backend is where a Queue's documents live. The exported methods have
// validated ids and states and encoded values before calling it.
type backend interface {
	put(state, id string, b []byte) error
	putOnce(state, id string, v any) error
	find(id string) (string, bool)
	exists(state, id string) bool
	claim(from, to, id string, c store.Claim) error
	finish(from, to, id string, c store.Claim) error
	move(from, to, id string) error
	remove(state, id string) error
	read(state, id string) ([]byte, error)
	list(state string) ([]Entry, error)
	ids(state string) ([]string, error)
	count(state string) int
	reject(state, id, reason string) error
	rejectFile(state, name, reason string) error
	sweepTemps(age time.Duration, now time.Time) int
}

// New returns the file queue of kind (layout.QEvents, QTasks or QMessages).
// em receives system.file_rejected events; it may be nil.
func New(l layout.Layout, kind string, em *eventlog.Emitter) *Queue {
	q := &Queue{l: l, kind: kind, states: layout.QueueStates[kind], em: em, MaxSize: DefaultMaxSize}
	q.b = files{q}
	return q
}

// Kind returns the queue kind.
func (q *Queue) Kind() string { return q.kind }

// Dir returns the directory of a state. On a store it is only where the
// state's files would be in file mode: no document lives there.
func (q *Queue) Dir(state string) string { return q.l.QueueState(q.kind, state) }

// Path returns the file path of id in state (file mode; see Dir). It does
// not validate id; every exported operation does.
func (q *Queue) Path(state, id string) string { return filepath.Join(q.Dir(state), id+".json") }

func (q *Queue) checkState(state string) error {
	for _, s := range q.states {
		if s == state {
			return nil
		}
	}
	return fmt.Errorf("queue %s has no state %q", q.kind, state)
}

// checkPut checks the id and state of a write.
func (q *Queue) checkPut(state, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("put %s/%s: %w", q.kind, state, err)
	}
	return q.checkState(state)
}

func encode(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		if !json.Valid(b) {
			return nil, errors.New("not valid JSON")
		}
		return b, nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Put writes v (a value or raw JSON bytes) as state/<id>.json, replacing any
// file of that name there. Use it to rewrite a file its owner holds. On a
// store the document lands in state wherever it was.
func (q *Queue) Put(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q.kind, id, err)
	}
	return q.b.put(state, id, b)
}

// PutOnce creates state/<id>.json only if id is in none of the queue's states
// (rejected/ included, SPEC §9.3). It returns an error wrapping ErrExists
// otherwise, leaving everything untouched.
func (q *Queue) PutOnce(state, id string, v any) error {
	if err := q.checkPut(state, id); err != nil {
		return err
	}
	return q.b.putOnce(state, id, v)
}

// Find returns the state holding id, if any.
func (q *Queue) Find(id string) (string, bool) {
	if !ids.Valid(id) {
		return "", false
	}
	return q.b.find(id)
}

// Exists reports whether id is in state.
func (q *Queue) Exists(state, id string) bool {
	if !ids.Valid(id) {
		return false
	}
	return q.b.exists(state, id)
}

// Claim renames from/<id> to to/<id> without replacing. Exactly one of many
// concurrent claimants succeeds; the others get ErrTaken. On a store the
// claim is recorded for this queue's host, attempt 0 (ClaimAs names one).
func (q *Queue) Claim(from, to, id string) error {
	return q.ClaimAs(from, to, id, store.Claim{Holder: q.host})
}

// ClaimAs is Claim for holder c (a host and the task's attempt). On a
// store only c may later FinishAs the document; on files c is not
// recorded (one machine, and the claimant's role alone moves it on).
func (q *Queue) ClaimAs(from, to, id string, c store.Claim) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("claim %s: %w", q.kind, err)
	}
	return q.b.claim(from, to, id, c)
}

// FinishAs moves a claimed document on, only for the holder c that claimed
// it: on a store anyone else gets an error wrapping store.ErrFenced, and a
// document no longer in from one satisfying fs.ErrNotExist. On files it is
// Move.
func (q *Queue) FinishAs(from, to, id string, c store.Claim) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("finish %s: %w", q.kind, err)
	}
	return q.b.finish(from, to, id, c)
}

// Move renames from/<id> to to/<id>, replacing a file of that name in to/ (a
// repeated step after a crash lands on the same name). A missing source
// returns an error satisfying fs.ErrNotExist.
func (q *Queue) Move(from, to, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("move %s: %w", q.kind, err)
	}
	return q.b.move(from, to, id)
}

// Remove deletes state/<id>.json; a missing file is not an error.
func (q *Queue) Remove(state, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("remove %s: %w", q.kind, err)
	}
	return q.b.remove(state, id)
}

// Read returns the bytes of state/<id>.json, refusing files over MaxSize.
// A document not in state gives an error satisfying fs.ErrNotExist.
func (q *Queue) Read(state, id string) ([]byte, error) {
	if err := ids.Check(id); err != nil {
		return nil, fmt.Errorf("read %s: %w", q.kind, err)
	}
	return q.b.read(state, id)
}

// ReadJSON reads state/<id>.json into v.
func (q *Queue) ReadJSON(state, id string, v any) error {
	b, err := q.Read(state, id)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s %s: %w", q.kind, id, err)
	}
	return nil
}

// ReadLimited reads a regular file of at most max bytes: it never follows a
// symlink and never blocks on a FIFO planted in a queue directory
// (atomicfile.ReadLimited; atomicfile.ErrNotRegular, atomicfile.ErrTooLarge).
func ReadLimited(path string, max int64) ([]byte, error) {
	return atomicfile.ReadLimited(path, max)
}

// Entry is one listed queue file.
type Entry struct {
	ID    string
	State string
	// Path is the file (file mode); "" on a store.
	Path      string
	Priority  string
	CreatedAt time.Time
	Data      []byte
	// Checked: Data passed CheckDocument (List checks every entry it
	// returns outside rejected/, or remembers the same file version
	// passing), so a consumer may decode it without validating again.
	Checked bool
}

// Decode unmarshals the entry's data into v.
func (e Entry) Decode(v any) error { return json.Unmarshal(e.Data, v) }

type header struct {
	Priority  string `json:"priority"`
	CreatedAt string `json:"created_at"`
}

// PriorityRank orders priorities: high 0, normal 1, low 2, anything else 3.
func PriorityRank(p string) int { return store.PriorityRank(p) }

// List returns the files of state ordered by priority (high → normal → low),
// then created_at (oldest first), then id (SPEC §9.23). Dot-files and
// .reason files are ignored. A poison entry (bad name, not a regular file,
// not JSON, too large, failing its kind's schema, id not its file name) is
// moved to rejected/ on the way and not returned. A file that vanishes
// between listing and reading is skipped.
func (q *Queue) List(state string) ([]Entry, error) {
	if err := q.checkState(state); err != nil {
		return nil, err
	}
	return q.b.list(state)
}

// SortEntries orders entries as List does (SPEC §9.23): priority (high →
// normal → low), then created_at (oldest first), then id.
func SortEntries(out []Entry) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := PriorityRank(a.Priority), PriorityRank(b.Priority); ra != rb {
			return ra < rb
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
}

// IDs returns the ids of the regular files in state, unordered and unread
// (cheap); it does not validate them (List and Count do).
func (q *Queue) IDs(state string) ([]string, error) { return q.b.ids(state) }

// Count returns the number of valid entries in state: what List would
// return, without ordering them. Poison entries met on the way are rejected
// (outside rejected/), so admission never counts a file no consumer can
// take. A file is read only when it is new or changed since the last count.
// In rejected/ it counts the rejected .json files.
func (q *Queue) Count(state string) int { return q.b.count(state) }

// Reject moves state/<id>.json to rejected/ with a reason. One already
// gone is not an error.
func (q *Queue) Reject(state, id, reason string) error {
	return q.b.reject(state, id, reason)
}

// RejectFile moves the file called name (any name found in the state dir) to
// rejected/, writes <name>.reason beside it and emits system.file_rejected.
// The name is taken from a directory listing, so it is a single path
// component; it is still checked. On a store only "<id>.json" names a
// document (Reject); any other name is an error.
func (q *Queue) RejectFile(state, name, reason string) error {
	return q.b.rejectFile(state, name, reason)
}

// RejectPath moves an arbitrary file (e.g. inbox/x.json) into rejDir with a
// reason file and a system.file_rejected event.
func RejectPath(src, rejDir, reason string, em *eventlog.Emitter) error {
	return rejectInto(src, rejDir, filepath.Base(src), reason, em)
}

// SweepTemps removes dot-temps older than age from every state directory.
// A store writes no temps: it returns 0.
func (q *Queue) SweepTemps(age time.Duration, now time.Time) int {
	return q.b.sweepTemps(age, now)
}
