package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// onStore keeps the values in a store's key-value.
type onStore struct {
	st store.Store
}

// OnStore returns the KV kept in st.
func OnStore(st store.Store) KV { return onStore{st: st} }

// nsCreate holds one row per key an Update ever created: the lock that
// makes two first writers of a key wait for each other (below).
const nsCreate = "kv-create"

func (s onStore) Get(ctx context.Context, ns, key string) ([]byte, error) {
	return s.st.Value(ctx, ns, key)
}

func (s onStore) Put(ctx context.Context, ns, key string, v []byte) error {
	return s.st.Update(ctx, func(tx store.Tx) error { return tx.Set(ns, key, v) })
}

func (s onStore) PutAll(ctx context.Context, ns string, vs map[string][]byte) error {
	return s.st.Update(ctx, func(tx store.Tx) error {
		for k, v := range vs {
			if err := tx.Set(ns, k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s onStore) Delete(ctx context.Context, ns, key string) error {
	return s.st.Update(ctx, func(tx store.Tx) error { return tx.Delete(ns, key) })
}

func (s onStore) List(ctx context.Context, ns string) (map[string][]byte, error) {
	return s.st.Values(ctx, ns)
}

// Update reads and writes in one transaction. Tx.Value locks the row it
// reads until the commit (SELECT … FOR UPDATE in PostgreSQL; the files
// store runs one transaction at a time), so two updaters of an existing
// key run one after the other. A key with no row yet has nothing to lock:
// the updater then writes the key's row in nsCreate (an upsert, which
// holds that row to the commit, so a second creator waits there) and reads
// again, seeing the value a creator before it committed.
func (s onStore) Update(ctx context.Context, ns, key string, fn func([]byte) ([]byte, error)) error {
	if err := store.CheckKey(ns, key); err != nil {
		return err
	}
	return s.st.Update(ctx, func(tx store.Tx) error {
		old, err := tx.Value(ns, key)
		if errors.Is(err, store.ErrNotFound) {
			if err := tx.Set(nsCreate, ns+":"+key, []byte{}); err != nil {
				return fmt.Errorf("update %s/%s: %w", ns, key, err)
			}
			old, err = tx.Value(ns, key)
			if errors.Is(err, store.ErrNotFound) {
				old, err = nil, nil
			}
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
