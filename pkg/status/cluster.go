package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Leader is who leads one leader role (the store's leaders): the host that
// last took it, at which epoch and when.
type Leader struct {
	Role  string
	Host  string
	Epoch int64
	Since time.Time
}

// Cluster is what the store shows beyond this host: every host of the
// registry (on one machine, this one) and the leader of each leader role.
type Cluster struct {
	Hosts   []store.Host
	Leaders []Leader
	// Errs: parts that could not be read (the rest is still shown).
	Errs []error
}

// ClusterSource reads the cluster. Leaders is nil when the source offers
// no way to list its leaders.
type ClusterSource struct {
	Hosts   func(ctx context.Context) ([]store.Host, error)
	Leaders func(ctx context.Context) ([]Leader, error)
}

// ErrNoLeaders: the store offers no list of its leaders.
var ErrNoLeaders = errors.New("the store lists no leaders")

// StoreCluster returns the cluster source of a store: its hosts registry
// (a host is alive within selfFence) and its leaders (only leaderships
// held now).
func StoreCluster(st store.Store, selfFence time.Duration) *ClusterSource {
	return &ClusterSource{
		Hosts: func(ctx context.Context) ([]store.Host, error) { return st.Hosts(ctx, selfFence) },
		Leaders: func(ctx context.Context) ([]Leader, error) {
			m, err := st.Leaders(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]Leader, 0, len(m))
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if li := m[name]; li.Held {
					out = append(out, Leader{Role: name, Host: li.Holder, Epoch: li.Epoch, Since: li.Since})
				}
			}
			return out, nil
		},
	}
}

// Read reads the cluster now; a source or part it lacks is an error in
// Errs.
func (c *ClusterSource) Read(ctx context.Context) Cluster {
	var out Cluster
	if c.Hosts == nil {
		out.Errs = append(out.Errs, errors.New("hosts: the store has no hosts registry"))
	} else if hs, err := c.Hosts(ctx); err != nil {
		out.Errs = append(out.Errs, fmt.Errorf("hosts: %w", err))
	} else {
		out.Hosts = hs
	}
	if c.Leaders == nil {
		out.Errs = append(out.Errs, fmt.Errorf("leaders: %w", ErrNoLeaders))
	} else if ls, err := c.Leaders(ctx); err != nil {
		out.Errs = append(out.Errs, fmt.Errorf("leaders: %w", err))
	} else {
		out.Leaders = ls
	}
	return out
}
