package kv

import (
	"context"
	"errors"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// onStore keeps the values in a store's key-value.
type onStore struct {
	st store.Store
	// lease, when set, fences every write: a leader's state (SPEC §12.2).
	lease func() store.Lease
}

// OnStore returns the KV kept in st.
func OnStore(st store.Store) KV { return onStore{st: st} }

// Fenced returns the KV kept in st whose every write is fenced by the
// lease lease returns (none while it returns nil): a leader's small state.
func Fenced(st store.Store, lease func() store.Lease) KV { return onStore{st: st, lease: lease} }

func (s onStore) update(ctx context.Context, fn func(store.Tx) error) error {
	return s.st.Update(ctx, func(tx store.Tx) error {
		if s.lease != nil {
			if l := s.lease(); l != nil {
				tx.Fence(l)
			}
		}
		return fn(tx)
	})
}

func (s onStore) Get(ctx context.Context, ns, key string) ([]byte, error) {
	return s.st.Value(ctx, ns, key)
}

func (s onStore) Put(ctx context.Context, ns, key string, v []byte) error {
	return s.update(ctx, func(tx store.Tx) error { return tx.Set(ns, key, v) })
}

func (s onStore) PutAll(ctx context.Context, ns string, vs map[string][]byte) error {
	return s.update(ctx, func(tx store.Tx) error {
		for k, v := range vs {
			if err := tx.Set(ns, k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s onStore) Delete(ctx context.Context, ns, key string) error {
	return s.update(ctx, func(tx store.Tx) error { return tx.Delete(ns, key) })
}

func (s onStore) List(ctx context.Context, ns string) (map[string][]byte, error) {
	return s.st.Values(ctx, ns)
}

// Update reads and writes in one transaction; Tx.ValueForUpdate keeps
// every other writer of the key out until the commit, so two updaters of
// one key, present or not yet, run one after the other.
func (s onStore) Update(ctx context.Context, ns, key string, fn func([]byte) ([]byte, error)) error {
	if err := store.CheckKey(ns, key); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		old, err := tx.ValueForUpdate(ns, key)
		if errors.Is(err, store.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return err
		}
		v, err := fn(old)
		if err != nil {
			return err
		}
		if v == nil {
			return tx.Delete(ns, key)
		}
		return tx.Set(ns, key, v)
	})
}
