package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// RenewLease is a store's lease that counts its renewals and remembers
// when the last one was made (a role's lease-renewal tests).
type RenewLease struct {
	store.Lease
	Renews atomic.Int64
	Last   atomic.Int64 // UnixNano of the last Renew
}

func (l *RenewLease) Renew(ctx context.Context) error {
	l.Last.Store(time.Now().UnixNano())
	l.Renews.Add(1)
	return l.Lease.Renew(ctx)
}

// RenewStore hands out RenewLeases; a transaction fenced by one is fenced
// by the store's own lease inside it.
type RenewStore struct {
	store.Store
	mu     sync.Mutex
	leases []*RenewLease
}

func (s *RenewStore) Lead(ctx context.Context, name string) (store.Lease, error) {
	l, err := s.Store.Lead(ctx, name)
	if err != nil {
		return nil, err
	}
	rl := &RenewLease{Lease: l}
	s.mu.Lock()
	s.leases = append(s.leases, rl)
	s.mu.Unlock()
	return rl, nil
}

// Taken lists the leases handed out so far, oldest first.
func (s *RenewStore) Taken() []*RenewLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*RenewLease(nil), s.leases...)
}

func (s *RenewStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(unwrapTx{tx}) })
}

type unwrapTx struct{ store.Tx }

func (t unwrapTx) Fence(l store.Lease) {
	if rl, ok := l.(*RenewLease); ok {
		l = rl.Lease
	}
	t.Tx.Fence(l)
}
