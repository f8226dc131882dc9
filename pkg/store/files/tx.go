package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// op is one journaled change. Each is applied so that applying it again
// after a crash ends in the same state (see apply).
type op struct {
	Op     string          `json:"op"` // put move remove reject emit set delete
	Q      string          `json:"q,omitempty"`
	State  string          `json:"state,omitempty"`
	To     string          `json:"to,omitempty"`
	ID     string          `json:"id,omitempty"`
	Data   []byte          `json:"data,omitempty"`
	Reason string          `json:"reason,omitempty"`
	Type   string          `json:"type,omitempty"`
	Actor  string          `json:"actor,omitempty"`
	Event  json.RawMessage `json:"event,omitempty"`
}

// tx stages changes over an overlay of what it already changed, so its own
// reads see its writes.
type tx struct {
	s      *Store
	ops    []op
	where  map[string]string  // "q/id" → state, "" = gone
	kv     map[string]*[]byte // "ns/key" → value, nil = deleted
	leases []*lease
	err    error // a Fence on a foreign lease
}

// Update runs fn as one transaction (see the package doc).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.locked(func() error {
		t := &tx{s: s, where: map[string]string{}, kv: map[string]*[]byte{}}
		if err := fn(t); err != nil {
			return err
		}
		if t.err != nil {
			return t.err
		}
		for _, l := range t.leases {
			if !l.current() {
				return fmt.Errorf("commit: lease %s epoch %d: %w", l.name, l.epoch, store.ErrFenced)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return s.commit(t.ops)
	})
}

// commit makes ops durable as a whole. A single change is atomic on its
// own and needs no journal.
func (s *Store) commit(ops []op) error {
	switch len(ops) {
	case 0:
		return nil
	case 1:
		return s.apply(ops)
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode store journal: %w", err)
	}
	if err := atomicfile.WriteFile(s.journal(), b, 0o600); err != nil {
		return err
	}
	return s.apply(ops)
}

// apply performs ops in order, syncs every directory a rename or removal
// touched, then removes the journal (when there is one).
func (s *Store) apply(ops []op) error {
	dirs := map[string]bool{}
	var events []op
	for _, o := range ops {
		if o.Op == "emit" {
			// Events go last: a crash before them loses nothing the
			// journal cannot redo, and no event names a change not made.
			events = append(events, o)
			continue
		}
		if err := s.applyOne(o, dirs); err != nil {
			return fmt.Errorf("apply %s %s %s: %w", o.Op, o.Q, o.ID, err)
		}
	}
	for d := range dirs {
		// A Delete of a key whose namespace never had a file names a
		// directory that does not exist: nothing changed there.
		if err := atomicfile.SyncDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, o := range events {
		if err := s.log.Append(o.Type, o.Actor, o.Event); err != nil {
			return err
		}
	}
	if err := os.Remove(s.journal()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove store journal: %w", err)
	}
	return atomicfile.SyncDir(s.dir)
}

func (s *Store) applyOne(o op, dirs map[string]bool) error {
	switch o.Op {
	case "put":
		return s.queues[o.Q].put(o.State, o.ID, o.Data)
	case "move":
		src, dst := s.path(o.Q, o.State, o.ID), s.path(o.Q, o.To, o.ID)
		if err := os.Rename(src, dst); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, serr := os.Lstat(dst); serr == nil {
					return nil // done before a crash
				}
			}
			return err
		}
		dirs[filepath.Dir(src)], dirs[filepath.Dir(dst)] = true, true
	case "remove":
		p := s.path(o.Q, o.State, o.ID)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		dirs[filepath.Dir(p)] = true
	case "reject":
		if _, err := os.Lstat(s.path(o.Q, o.State, o.ID)); err != nil {
			return nil // moved before a crash
		}
		if err := s.queues[o.Q].reject(o.State, o.ID, o.Reason); err != nil {
			return err
		}
		dirs[s.queues[o.Q].dir(o.State)], dirs[s.queues[o.Q].dir(layout.Rejected)] = true, true
	case "set":
		p, err := s.kvPath(o.Q, o.ID)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		return atomicfile.WriteFile(p, o.Data, 0o600)
	case "delete":
		p, err := s.kvPath(o.Q, o.ID)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		dirs[filepath.Dir(p)] = true
	default:
		return fmt.Errorf("unknown journal op %q", o.Op)
	}
	return nil
}

// find returns the state of id as this transaction sees it.
func (t *tx) find(q, id string) (string, bool) {
	if st, ok := t.where[q+"/"+id]; ok {
		return st, st != ""
	}
	return t.s.queues[q].find(id)
}

func (t *tx) PutOnce(q, state, id string, data []byte) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	if st, ok := t.find(q, id); ok {
		return fmt.Errorf("put %s %s: %w in %s", q, id, store.ErrExists, st)
	}
	return t.put(q, state, id, data)
}

func (t *tx) Put(q, state, id string, data []byte) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	return t.put(q, state, id, data)
}

func (t *tx) put(q, state, id string, data []byte) error {
	if _, _, err := store.ParseHeader(data); err != nil {
		return fmt.Errorf("put %s %s: not a JSON object: %w", q, id, err)
	}
	t.ops = append(t.ops, op{Op: "put", Q: q, State: state, ID: id, Data: data})
	t.where[q+"/"+id] = state
	return nil
}

func (t *tx) Move(q, from, to, id string) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	if err := store.Check(q, to, id); err != nil {
		return err
	}
	if st, ok := t.find(q, id); !ok || st != from {
		return fmt.Errorf("move %s %s %s→%s: %w", q, id, from, to, store.ErrNotFound)
	}
	t.ops = append(t.ops, op{Op: "move", Q: q, State: from, To: to, ID: id})
	t.where[q+"/"+id] = to
	return nil
}

func (t *tx) Finish(q, from, to, id string, c store.Claim) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	b, err := t.Value(nsClaims, q+"."+id)
	var got store.Claim
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil || got != c {
		return fmt.Errorf("finish %s %s as %s attempt %d: %w", q, id, c.Holder, c.Attempt, store.ErrFenced)
	}
	if err := t.Move(q, from, to, id); err != nil {
		return err
	}
	return t.Delete(nsClaims, q+"."+id)
}

func (t *tx) Remove(q, state, id string) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	t.ops = append(t.ops, op{Op: "remove", Q: q, State: state, ID: id})
	if st, ok := t.find(q, id); ok && st == state {
		t.where[q+"/"+id] = ""
	}
	return nil
}

func (t *tx) Reject(q, state, id, reason string) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	if st, ok := t.find(q, id); !ok || st != state {
		return fmt.Errorf("reject %s %s: %w in %s", q, id, store.ErrNotFound, state)
	}
	t.ops = append(t.ops, op{Op: "reject", Q: q, State: state, ID: id, Reason: reason})
	t.where[q+"/"+id] = layout.Rejected
	return nil
}

func (t *tx) Emit(typ, actor string, data any) error {
	raw, err := store.EncodeData(data)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	t.ops = append(t.ops, op{Op: "emit", Type: typ, Actor: actor, Event: raw})
	return nil
}

func (t *tx) Value(ns, key string) ([]byte, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return nil, err
	}
	if v, ok := t.kv[ns+"/"+key]; ok {
		if v == nil {
			return nil, fmt.Errorf("value %s/%s: %w", ns, key, store.ErrNotFound)
		}
		return *v, nil
	}
	return t.s.readKV(ns, key)
}

// ValueForUpdate is Value: the store runs one transaction at a time
// (tx.lock), so nothing else writes the key before this one ends.
func (t *tx) ValueForUpdate(ns, key string) ([]byte, error) { return t.Value(ns, key) }

func (t *tx) Set(ns, key string, value []byte) error {
	if _, err := t.s.kvPath(ns, key); err != nil {
		return err
	}
	v := append([]byte(nil), value...)
	t.ops = append(t.ops, op{Op: "set", Q: ns, ID: key, Data: v})
	t.kv[ns+"/"+key] = &v
	return nil
}

func (t *tx) Delete(ns, key string) error {
	if _, err := t.s.kvPath(ns, key); err != nil {
		return err
	}
	t.ops = append(t.ops, op{Op: "delete", Q: ns, ID: key})
	t.kv[ns+"/"+key] = nil
	return nil
}

func (t *tx) Fence(l store.Lease) {
	fl, ok := l.(*lease)
	if !ok || fl.s != t.s {
		t.err = fmt.Errorf("fence: lease %s is not of this store: %w", l.Name(), store.ErrFenced)
		return
	}
	t.leases = append(t.leases, fl)
}
