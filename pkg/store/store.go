// Package store is the seam between the roles and where their shared state
// lives (SPEC §11.6): the queues (events, tasks, messages), the seen index
// of admitted external events, the internal event log, leadership, and a
// small key-value for pauses, control requests and replies, deliveries,
// spend and sequences. Two implementations satisfy it: store/files (the
// single-machine default, today's files under $BASE_DIR) and store/pg
// (PostgreSQL, shared by every host). One conformance suite checks both.
//
// # The contract
//
// Documents are JSON objects named by a safe id (ids.Check) in one queue
// kind (layout.QEvents, QTasks, QMessages) and one state of that kind
// (layout.QueueStates). An id lives in at most one state of its queue.
//
//   - PutOnce creates a document only if its id is in none of the queue's
//     states, rejected included; otherwise ErrExists and nothing changes.
//   - Claim moves a document from one state to another for one holder
//     (host and attempt). Of many concurrent claimants exactly one wins;
//     the others get ErrTaken. Finish moves a claimed document on only for
//     the holder that claimed it (ErrFenced otherwise): a result is
//     accepted only from the host and attempt that hold the claim.
//   - List returns a state's documents by priority (high, normal, low,
//     other), then created_at (oldest first), then id.
//   - Reject moves a document to rejected with a reason. A store finds
//     poison (not JSON, an unsafe name) on its own and rejects it the same
//     way, so poison never blocks a queue.
//   - Update runs a group of changes as one transaction: after it returns
//     nil every change is durable; after an error or a crash at any point
//     none is visible, or (files, after a crash mid-commit) all of them
//     are, finished by the next caller that touches the store.
//   - Admit queues an external event into events/pending at most once per
//     id, ever (the seen index outlives the queue files).
//   - Events reads the event log after a cursor. A consumer stores the
//     cursor of the last event it handled (in the key-value, or as an SSE
//     id) and resumes from it; no event is skipped or delivered twice to a
//     consumer that saves the cursor of each event it handled.
//   - Lead takes a named leadership without blocking (ErrHeld when another
//     holds it). The Lease carries an epoch that grows with every new
//     leader; Tx.Fence makes a transaction commit only while that epoch is
//     still current, and Lost is closed the moment the lease is gone (the
//     leader stops at once; the runner relaunches it in standby).
//
// # Driving it
//
//	st, _ := files.Open(layout, hostID) // or pg.Open(ctx, dsn, hostID)
//	lease, err := st.Lead(ctx, "king")          // store.ErrHeld: stand by
//	docs, _ := st.List(ctx, layout.QEvents, layout.Pending)
//	err = st.Update(ctx, func(tx store.Tx) error {
//		tx.Fence(lease)
//		if err := tx.Move(layout.QEvents, layout.Pending, layout.Dispatched, ev.ID); err != nil {
//			return err
//		}
//		if err := tx.PutOnce(layout.QTasks, layout.Pending, task.ID, taskJSON); err != nil {
//			return err
//		}
//		return tx.Emit("task.created", "king", data)
//	})
//	err = st.Claim(ctx, layout.QTasks, layout.Pending, layout.InProgress, id,
//		store.Claim{Holder: host, Attempt: retry}) // store.ErrTaken for losers
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

var (
	// ErrExists: PutOnce found the id in some state of the queue.
	ErrExists = errors.New("already exists")
	// ErrTaken: a claimant lost (another won, or the document left the
	// source state).
	ErrTaken = errors.New("already taken")
	// ErrNotFound: no such document, key or event.
	ErrNotFound = errors.New("not found")
	// ErrFenced: the claim or the lease a write depends on is no longer
	// held by the writer.
	ErrFenced = errors.New("fenced")
	// ErrDuplicate: Admit saw the event id before.
	ErrDuplicate = errors.New("duplicate event")
	// ErrHeld: another holder has the leadership.
	ErrHeld = errors.New("leadership held elsewhere")
)

// Key-value namespaces the roles use. A namespace and a key are safe ids.
const (
	NSPauses     = "pauses"     // general or engine → pause record
	NSControl    = "control"    // control request id → request
	NSReplies    = "replies"    // control request id → reply
	NSDeliveries = "deliveries" // message id → envoy delivery record
	NSSpend      = "spend"      // day → spend totals
	NSSequences  = "sequences"  // name (task-seq, msg-seq) → "YYYYMMDD:N"
)

// Doc is one queue document.
type Doc struct {
	Queue     string
	State     string
	ID        string
	Priority  string // from the document: high, normal, low or other
	CreatedAt time.Time
	Data      []byte
	Reason    string // why it was rejected (rejected state only)
	Claim     Claim  // who claimed it, when known
}

// Claim names who holds a claimed document: the host and the attempt.
type Claim struct {
	Holder  string
	Attempt int
}

// Cursor is an opaque place in the event log; "" is its beginning. Only
// the store that made it can read it.
type Cursor string

// Event is one internal event with the cursor just past it.
type Event struct {
	Cursor Cursor
	TS     string
	Type   string
	Actor  string
	Data   json.RawMessage
}

// RenewEvery is how often a holder renews its lease (Lease.Renew): well
// inside the shortest store.leader_stall_seconds (10 s).
const RenewEvery = 5 * time.Second

// Lease is a held leadership.
type Lease interface {
	Name() string
	// Epoch grows by one with every acquisition of this name, anywhere.
	Epoch() int64
	// Lost is closed when the lease is gone (session lost, released).
	Lost() <-chan struct{}
	// Release gives the leadership up.
	Release() error
	// Renew says the leader is making progress; a leader that stops
	// renewing for store.leader_stall_seconds may be deposed by a standby
	// (postgres). The files store's flock needs no renewal.
	Renew(ctx context.Context) error
}

// LeaderInfo is who last took a leadership and whether it is held now
// (operators' views: start status).
type LeaderInfo struct {
	// Holder is the host that took it last (empty in the files store: the
	// one machine).
	Holder string
	Epoch  int64
	// Since is when Holder took it (zero when unknown).
	Since time.Time
	// Held: some session holds it at this moment.
	Held bool
}

// Store is what the roles exchange.
type Store interface {
	// Get returns the document id of queue q, in whatever state it is.
	Get(ctx context.Context, q, id string) (Doc, error)
	// List returns the documents of a state in dispatch order.
	List(ctx context.Context, q, state string) ([]Doc, error)
	// Claim moves id from one state to another for c; losers get ErrTaken.
	Claim(ctx context.Context, q, from, to, id string, c Claim) error
	// ClaimNext claims the first document of from in List order that no
	// other claimant is taking; ErrNotFound when there is none.
	ClaimNext(ctx context.Context, q, from, to string, c Claim) (Doc, error)
	// Update runs fn as one transaction (see the package doc). fn's error,
	// or an error from committing, rolls everything back and is returned.
	Update(ctx context.Context, fn func(Tx) error) error
	// Admit queues an external event into events/pending unless its id
	// was ever admitted (ErrDuplicate).
	Admit(ctx context.Context, id string, data []byte) error
	// Events returns up to max events after cur.
	Events(ctx context.Context, cur Cursor, max int) ([]Event, error)
	// Lead takes the named leadership without waiting (ErrHeld).
	Lead(ctx context.Context, name string) (Lease, error)
	// Value returns a key-value entry (ErrNotFound).
	Value(ctx context.Context, ns, key string) ([]byte, error)
	// Values returns every entry of a namespace.
	Values(ctx context.Context, ns string) (map[string][]byte, error)
	// Emit appends one event to the event log outside any transaction
	// (files: one O_APPEND line of logs/events.log; postgres: one row).
	Emit(ctx context.Context, typ, actor string, data any) error
	// Leaders lists every leadership by name (operators' views).
	Leaders(ctx context.Context) (map[string]LeaderInfo, error)
	// Changes announces committed changes ("<queue>/<state>", "kv/<ns>",
	// "*" when some may have been missed) until ctx ends. A store whose
	// readers see changes by other means returns nil (files: the roles
	// watch the directories).
	Changes(ctx context.Context) <-chan string
	// RenewHost records that host id is alive (the hosts registry, SPEC
	// §11.7 "Host loss"); Hosts lists the registry, Alive meaning renewed
	// within selfFence; ForgetHost removes a retired host. The files store
	// has one host, always alive.
	RenewHost(ctx context.Context, id, version string, started time.Time) error
	Hosts(ctx context.Context, selfFence time.Duration) ([]Host, error)
	ForgetHost(ctx context.Context, id string) error
	// TrimEvents retires the event log's events older than keep at now
	// and returns how many files or rows went (the retention of the
	// event log, run by one host a day). files: logs/events.log is
	// closed into events-YYYYMMDD.log, the local day before now (a
	// reader's cursor follows it there), and the splits last written
	// before now-keep are removed; postgres: the rows written before
	// now-keep are deleted.
	TrimEvents(ctx context.Context, now time.Time, keep time.Duration) (int, error)
	// EventHorizon reports what holds the event log's readers back (the
	// verdict names it). postgres: a reader delivers only rows below the
	// oldest transaction still open anywhere on the server, in any
	// database, so one transaction left open freezes every reader; files:
	// never held back (the zero Horizon).
	EventHorizon(ctx context.Context) (Horizon, error)
	Close() error
}

// Horizon is what holds the event log's readers back (EventHorizon).
type Horizon struct {
	// Held counts the rows readers cannot see yet: written at or past the
	// oldest transaction still open.
	Held int
	// HeldFor is the age of the oldest of them, by the store's clock.
	HeldFor time.Duration
	// Oldest names the oldest open transaction ("" when none): its xid,
	// backend pid, database and application.
	Oldest string
	// Since is when Oldest began (zero when the server does not say: it
	// hides another user's transaction start without pg_read_all_stats).
	Since time.Time
}

// Host is one row of the hosts registry as Hosts read it.
type Host struct {
	ID        string
	StartedAt time.Time // when the host's kingdom started (its own clock)
	RenewedAt time.Time // its last renewal (the store's clock)
	Version   string
	// Age is how long ago RenewedAt was, by the store's clock when Hosts
	// read it.
	Age time.Duration
	// ListedAt is the reader's clock when Hosts read the row.
	ListedAt time.Time
	// Alive: renewed within the self-fence window Hosts was given.
	Alive bool
}

// Tx is one transaction's view. Its methods report problems at once
// (ErrExists, ErrNotFound, ErrFenced, a bad id); fn decides whether to go
// on or to return the error and roll back.
type Tx interface {
	PutOnce(q, state, id string, data []byte) error
	// Put writes id into state, replacing it there (its owner rewrites it).
	Put(q, state, id string, data []byte) error
	// Move moves id from one state to another, replacing a copy in to
	// (ErrNotFound when id is not in from).
	Move(q, from, to, id string) error
	// Finish is Move for a claimed document, only for its holder c.
	Finish(q, from, to, id string, c Claim) error
	Remove(q, state, id string) error
	Reject(q, state, id, reason string) error
	Emit(typ, actor string, data any) error
	Value(ns, key string) ([]byte, error)
	// ValueForUpdate is Value that also keeps every other transaction
	// from writing the key, present or not, until this one ends: a
	// read-modify-write of one key (kv.Update) runs one at a time.
	ValueForUpdate(ns, key string) ([]byte, error)
	Set(ns, key string, value []byte) error
	Delete(ns, key string) error
	// Fence makes the commit fail with ErrFenced unless l is still the
	// current holder of its name.
	Fence(l Lease)
}

// PriorityRank orders priorities: high 0, normal 1, low 2, anything else 3.
func PriorityRank(p string) int {
	switch p {
	case "high":
		return 0
	case "normal":
		return 1
	case "low":
		return 2
	}
	return 3
}

// Header is the part of a document both stores read to order it.
type Header struct {
	Priority  string `json:"priority"`
	CreatedAt string `json:"created_at"`
}

// ParseHeader reads priority and created_at from a JSON document; a
// missing or unparsable created_at is the zero time.
func ParseHeader(data []byte) (priority string, created time.Time, err error) {
	var h Header
	if err := json.Unmarshal(data, &h); err != nil {
		return "", time.Time{}, err
	}
	t, _ := time.Parse(time.RFC3339Nano, h.CreatedAt)
	return h.Priority, t, nil
}

// Check validates a queue kind, a state of it and an id (ids.Check): every
// store calls it before an id becomes a path or a row.
func Check(q, state, id string) error {
	states, ok := layout.QueueStates[q]
	if !ok {
		return fmt.Errorf("no queue %q", q)
	}
	if state != "" && !slices.Contains(states, state) {
		return fmt.Errorf("queue %s has no state %q", q, state)
	}
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("%s id: %w", q, err)
	}
	return nil
}

// CheckKey validates a key-value namespace and key.
func CheckKey(ns, key string) error {
	if err := ids.Check(ns); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	if err := ids.Check(key); err != nil {
		return fmt.Errorf("key in %s: %w", ns, err)
	}
	return nil
}

// EncodeData turns an event's data (nil, raw JSON, or a value) into JSON.
func EncodeData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if !json.Valid(d) {
			return nil, errors.New("event data is not valid JSON")
		}
		return d, nil
	}
	return json.Marshal(data)
}
