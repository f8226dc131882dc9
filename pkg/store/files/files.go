// Package files is the single-machine store (SPEC §11.6 kind: files): the
// store seam over today's files under $BASE_DIR. Queue documents are the
// queue/<kind>/<state>/<id>.json files (queue.go: directories as states,
// poison moved to rejected/ with a .reason), admission is the seen index of
// state/sentinel/seen/ (seen.go), the event log is logs/events.log
// (appended through eventlog.File, read by logcursor.go), leadership is
// the role's flock (state/<name>/leader.lock) with an epoch counter beside
// it, and the key-value keeps each namespace in the roles' own files
// (kv.go), any other under state/store/kv/<ns>/.
//
// A transaction (Store.Update) is a redo journal: the changes are staged in
// memory while fn runs, written whole to state/store/journal.json (temp,
// fsync, rename), applied one by one, made durable, and only then is the
// journal removed. Every write of the store holds state/store/tx.lock, and
// the first thing a lock holder does is finish a journal a killed writer
// left, so after a crash a transaction is either absent (the journal never
// appeared) or whole. Each change is written to be repeatable, so finishing
// a journal twice is harmless; only its events may then appear twice in
// events.log (at-least-once, as a file cursor always was). Readers take no
// lock: a List during a commit may see some of its files already moved,
// exactly as the roles see today's renames.
package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// nsClaims holds who claimed a document: key "<queue>.<id>".
const nsClaims = "claims"

// Store is the file store of one base directory.
type Store struct {
	l      layout.Layout
	host   string    // this machine's host id (Hosts)
	opened time.Time // when Open ran (Hosts: the host's start)
	dir    string    // state/store
	queues map[string]*queueDirs
	seen   *seenIndex     // seen.go
	log    *eventlog.File // logs/events.log

	mu     sync.Mutex     // one writer per process; tx.lock orders processes
	lock   *lockfile.File // nil when read-only
	ro     bool           // OpenReadOnly
	closed bool           // Close ran (under mu)

	cmu  sync.Mutex // the event-log reader below
	rd   *logCursor
	rpos store.Cursor
}

var _ store.Store = (*Store)(nil)

// Open creates the tree of l if needed and returns its store. It finishes a
// transaction a killed writer left behind. host is this machine's host id,
// as the roles resolve it.
func Open(l layout.Layout, host string) (*Store, error) {
	if err := ids.Check(host); err != nil {
		return nil, fmt.Errorf("open file store: host id: %w", err)
	}
	if err := l.Ensure(); err != nil {
		return nil, fmt.Errorf("open file store: %w", err)
	}
	s := newStore(l, host, false)
	if err := os.MkdirAll(filepath.Join(s.dir, "kv"), 0o700); err != nil {
		return nil, fmt.Errorf("open file store: %w", err)
	}
	lf, err := lockfile.Open(filepath.Join(s.dir, "tx.lock"))
	if err != nil {
		return nil, err
	}
	s.lock = lf
	if err := s.locked(func() error { return nil }); err != nil {
		lf.Close()
		return nil, err
	}
	return s, nil
}

// ErrReadOnly: a write on a store opened with OpenReadOnly.
var ErrReadOnly = errors.New("the files store is open read-only (the base dir belongs to another user)")

// OpenReadOnly opens an existing tree only to read it: an operator's
// command in a tree another user runs (start status, chamberlain --once
// from a root shell). It creates nothing, takes no lock, leaves poison
// where it lies (not listed), finishes no journal (a reader may then see
// half of a transaction a killed writer left, until that writer's
// successor finishes it) and refuses every write with ErrReadOnly.
func OpenReadOnly(l layout.Layout, host string) (*Store, error) {
	if err := ids.Check(host); err != nil {
		return nil, fmt.Errorf("open file store: host id: %w", err)
	}
	if _, err := os.Stat(l.Base); err != nil {
		return nil, fmt.Errorf("open file store: %w", err)
	}
	return newStore(l, host, true), nil
}

func newStore(l layout.Layout, host string, ro bool) *Store {
	s := &Store{l: l, host: host, opened: time.Now(), dir: filepath.Join(l.StateDir(), "store"), queues: map[string]*queueDirs{}, ro: ro}
	s.log = eventlog.NewFile(l.EventsLog(), l.RotateLock(), nil)
	for kind := range layout.QueueStates {
		s.queues[kind] = &queueDirs{l: l, kind: kind, states: layout.QueueStates[kind], log: s.log, ro: ro}
	}
	s.seen = newSeenIndex(l.SeenDir())
	return s
}

// Close releases the store's descriptors.
func (s *Store) Close() error {
	s.cmu.Lock()
	if s.rd != nil {
		s.rd.close()
		s.rd = nil
	}
	s.cmu.Unlock()
	s.log.Close()
	// After the transaction in flight, if any: a caller closing the store
	// while another goroutine still writes gets that write whole, and
	// every later one ErrClosed.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.lock == nil {
		return nil
	}
	return s.lock.Close()
}

// ErrClosed: a write on a closed store.
var ErrClosed = errors.New("the files store is closed")

func (s *Store) journal() string { return filepath.Join(s.dir, "journal.json") }

// locked runs fn holding the write lock, after finishing a left-over
// journal.
func (s *Store) locked(fn func() error) error {
	if s.ro {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.lock.Lock(); err != nil {
		return err
	}
	defer s.lock.Unlock()
	if err := s.recover(); err != nil {
		return err
	}
	return fn()
}

// recover finishes the journal a killed writer left. Must hold the lock.
func (s *Store) recover() error {
	b, err := os.ReadFile(s.journal())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read store journal: %w", err)
	}
	var ops []op
	if err := json.Unmarshal(b, &ops); err != nil {
		// The journal appears by rename, whole, so this is damage by
		// hand; applying part of it would be worse than dropping it.
		return fmt.Errorf("decode store journal %s: %w", s.journal(), err)
	}
	return s.apply(ops)
}

// recoverIfNeeded finishes a left-over journal before a read, so a reader
// never sees a killed writer's half.
func (s *Store) recoverIfNeeded() error {
	if s.ro {
		return nil
	}
	if _, err := os.Lstat(s.journal()); err != nil {
		return nil
	}
	return s.locked(func() error { return nil })
}

func (s *Store) path(q, state, id string) string { return s.queues[q].path(state, id) }

// Get returns id of queue q in whatever state holds it.
func (s *Store) Get(ctx context.Context, q, id string) (store.Doc, error) {
	if err := store.Check(q, "", id); err != nil {
		return store.Doc{}, err
	}
	if err := s.recoverIfNeeded(); err != nil {
		return store.Doc{}, err
	}
	qq := s.queues[q]
	state, ok := qq.find(id)
	if !ok {
		return store.Doc{}, fmt.Errorf("get %s %s: %w", q, id, store.ErrNotFound)
	}
	b, err := qq.read(state, id)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return store.Doc{}, fmt.Errorf("get %s %s: %w", q, id, store.ErrNotFound)
		}
		return store.Doc{}, err
	}
	d := s.doc(q, state, id, b)
	return d, nil
}

func (s *Store) doc(q, state, id string, b []byte) store.Doc {
	d := store.Doc{Queue: q, State: state, ID: id, Data: b}
	d.Priority, d.CreatedAt, _ = store.ParseHeader(b)
	if state == layout.Rejected {
		d.Reason = s.queues[q].reason(id)
	}
	if c, err := s.claimOf(q, id); err == nil {
		d.Claim = c
	}
	return d
}

// List returns the documents of state in dispatch order; poison met on the
// way goes to rejected/ (queue.go).
func (s *Store) List(ctx context.Context, q, state string) ([]store.Doc, error) {
	if err := store.Check(q, state, "x"); err != nil {
		return nil, err
	}
	if err := s.recoverIfNeeded(); err != nil {
		return nil, err
	}
	return s.queues[q].list(state)
}

// Claim moves id from → to for c (a no-replace rename under the write lock,
// with c recorded in the same journal).
func (s *Store) Claim(ctx context.Context, q, from, to, id string, c store.Claim) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	if err := store.Check(q, to, id); err != nil {
		return err
	}
	return s.Update(ctx, func(t store.Tx) error {
		tx := t.(*tx)
		if st, ok := tx.find(q, id); !ok || st != from {
			return fmt.Errorf("claim %s %s: %w", q, id, store.ErrTaken)
		}
		if err := tx.Move(q, from, to, id); err != nil {
			return err
		}
		b, _ := json.Marshal(c)
		return tx.Set(nsClaims, q+"."+id, b)
	})
}

// ClaimNext claims the first document of from in List order.
func (s *Store) ClaimNext(ctx context.Context, q, from, to string, c store.Claim) (store.Doc, error) {
	docs, err := s.List(ctx, q, from)
	if err != nil {
		return store.Doc{}, err
	}
	for _, d := range docs {
		err := s.Claim(ctx, q, from, to, d.ID, c)
		if errors.Is(err, store.ErrTaken) {
			continue
		}
		if err != nil {
			return store.Doc{}, err
		}
		d.State, d.Claim = to, c
		return d, nil
	}
	return store.Doc{}, fmt.Errorf("claim next %s/%s: %w", q, from, store.ErrNotFound)
}

func (s *Store) claimOf(q, id string) (store.Claim, error) {
	var c store.Claim
	b, err := s.readKV(nsClaims, q+"."+id)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

// Value returns one key-value entry.
func (s *Store) Value(ctx context.Context, ns, key string) ([]byte, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return nil, err
	}
	if err := s.recoverIfNeeded(); err != nil {
		return nil, err
	}
	return s.readKV(ns, key)
}

// Values returns every entry of ns.
func (s *Store) Values(ctx context.Context, ns string) (map[string][]byte, error) {
	if err := store.CheckKey(ns, "x"); err != nil {
		return nil, err
	}
	if err := s.recoverIfNeeded(); err != nil {
		return nil, err
	}
	return s.values(ns)
}

// Lead takes state/<name>/leader.lock (the role's flock) and bumps the
// epoch counter beside it.
func (s *Store) Lead(ctx context.Context, name string) (store.Lease, error) {
	if s.ro {
		return nil, ErrReadOnly
	}
	if err := ids.Check(name); err != nil {
		return nil, fmt.Errorf("lead: %w", err)
	}
	if err := os.MkdirAll(s.l.RoleStateDir(name), 0o700); err != nil {
		return nil, fmt.Errorf("lead %s: %w", name, err)
	}
	ld, err := lockfile.TryLeader(s.l.LeaderLock(name))
	if err != nil {
		var held *lockfile.HeldError
		if errors.As(err, &held) {
			return nil, fmt.Errorf("lead %s: %w (%v)", name, store.ErrHeld, err)
		}
		return nil, err
	}
	// Only the flock holder writes the counter, so read-increment-write
	// cannot race.
	epoch, err := readEpoch(s.epochPath(name))
	if err == nil {
		epoch++
		err = atomicfile.WriteFile(s.epochPath(name), []byte(strconv.FormatInt(epoch, 10)+"\n"), 0o600)
	}
	if err != nil {
		ld.Release()
		return nil, fmt.Errorf("lead %s: epoch: %w", name, err)
	}
	return &lease{s: s, name: name, epoch: epoch, ld: ld, lost: make(chan struct{})}, nil
}

func (s *Store) epochPath(name string) string {
	return filepath.Join(s.l.RoleStateDir(name), "leader.epoch")
}

func readEpoch(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

type lease struct {
	s     *Store
	name  string
	epoch int64
	mu    sync.Mutex
	ld    *lockfile.Leader
	lost  chan struct{}
}

func (l *lease) Name() string { return l.name }

// Renew does nothing: a flock lasts as long as its process, and one
// machine has no standby to hand the lead to.
func (l *lease) Renew(context.Context) error { return nil }

func (l *lease) Epoch() int64          { return l.epoch }
func (l *lease) Lost() <-chan struct{} { return l.lost }

// Release drops the flock. A flock is lost only with its process, so Lost
// closes only here.
func (l *lease) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ld == nil {
		return nil
	}
	err := l.ld.Release()
	l.ld = nil
	close(l.lost)
	return err
}

// current reports whether l still holds its name at its epoch.
func (l *lease) current() bool {
	l.mu.Lock()
	held := l.ld != nil
	l.mu.Unlock()
	if !held {
		return false
	}
	e, err := readEpoch(l.s.epochPath(l.name))
	return err == nil && e == l.epoch
}

// Leaders returns the leaderships this tree's roles took (a leader.epoch
// beside their lock): the epoch, and whether the lock is held now. Holder
// is empty: there is one machine.
func (s *Store) Leaders(ctx context.Context) (map[string]store.LeaderInfo, error) {
	paths, err := filepath.Glob(filepath.Join(s.l.StateDir(), "*", "leader.epoch"))
	if err != nil {
		return nil, fmt.Errorf("list leaders: %w", err)
	}
	out := map[string]store.LeaderInfo{}
	for _, p := range paths {
		name := filepath.Base(filepath.Dir(p))
		epoch, err := readEpoch(p)
		if err != nil {
			return nil, fmt.Errorf("list leaders: %s: %w", p, err)
		}
		li := store.LeaderInfo{Epoch: epoch}
		if fi, err := os.Stat(p); err == nil {
			li.Since = fi.ModTime()
		}
		li.Held, _ = lockfile.Held(s.l.LeaderLock(name))
		out[name] = li
	}
	return out, nil
}
