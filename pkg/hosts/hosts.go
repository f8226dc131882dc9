// Package hosts is the cluster's hosts registry (SPEC §11.7 "Host loss"),
// kept in PostgreSQL's hosts table (store/pg migration 002). Each host
// renews its row; the pure functions decide what a silence means:
//
//   - SelfFence: a host whose last successful Renew is self_fence_seconds
//     old stops claiming and kills its soldiers (it may be cut off from the
//     database while others still see it as gone).
//   - TakeoverDue: the king fails the tasks of a host silent for
//     takeover_seconds with the retryable HostLost. takeover exceeds
//     self_fence, so by then that host has killed its soldiers and a task
//     never runs on two hosts at once.
//
// Ages are measured by the database's clock (renewed_at and now() are both
// the server's), so hosts' clocks never need to agree.
//
//	reg := hosts.New(st.Pool())
//	err := reg.Renew(ctx, hostID, version, startedAt) // every renew period
//	if err == nil { lastOK = time.Now() }
//	if hosts.SelfFence(lastOK, time.Now(), cfg.SelfFence()) { stop claiming, kill soldiers }
//	list, _ := reg.List(ctx, cfg.SelfFence())
//	for _, h := range list { if hosts.TakeoverDue(h, time.Now(), cfg.Takeover()) { fail its tasks HostLost } }
package hosts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kingdom-dev/kingdom/pkg/ids"
)

// Host is one row of the registry as List read it.
type Host struct {
	ID        string
	StartedAt time.Time // when the host's kingdom started (its own clock)
	RenewedAt time.Time // its last renewal (the database's clock)
	Version   string
	// Age is how long ago RenewedAt was, by the database's clock when List
	// read it.
	Age time.Duration
	// ListedAt is the reader's clock when List read the row (TakeoverDue
	// adds the time since then to Age).
	ListedAt time.Time
	// Alive: renewed within the self-fence window List was given.
	Alive bool
}

// Registry reads and renews the hosts table.
type Registry struct {
	pool *pgxpool.Pool
}

// New returns the registry of the database pool (pg.Store.Pool()), whose
// migrations have created the hosts table.
func New(pool *pgxpool.Pool) *Registry { return &Registry{pool: pool} }

// Renew records that host id is alive, running version since started. A
// restarted host replaces its started_at and version.
func (r *Registry) Renew(ctx context.Context, id, version string, started time.Time) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("renew host: %w", err)
	}
	_, err := r.pool.Exec(ctx, `INSERT INTO hosts (host_id, started_at, renewed_at, version) VALUES ($1, $2, now(), $3)
		ON CONFLICT (host_id) DO UPDATE SET started_at=EXCLUDED.started_at, renewed_at=now(), version=EXCLUDED.version`,
		id, started, version)
	if err != nil {
		return fmt.Errorf("renew host %s: %w", id, err)
	}
	return nil
}

// List returns every host, by id, with its age; Alive is age < selfFence.
func (r *Registry) List(ctx context.Context, selfFence time.Duration) ([]Host, error) {
	rows, err := r.pool.Query(ctx, `SELECT host_id, started_at, renewed_at, version,
		greatest(extract(epoch FROM now() - renewed_at), 0)::float8 FROM hosts ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	listed := time.Now()
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Host, error) {
		var h Host
		var age float64
		err := row.Scan(&h.ID, &h.StartedAt, &h.RenewedAt, &h.Version, &age)
		h.Age = time.Duration(age * float64(time.Second))
		h.ListedAt = listed
		h.Alive = h.Age < selfFence
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	return out, nil
}

// Forget removes a host from the registry (a host retired for good; a
// host that renews again comes back).
func (r *Registry) Forget(ctx context.Context, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("forget host: %w", err)
	}
	if _, err := r.pool.Exec(ctx, "DELETE FROM hosts WHERE host_id=$1", id); err != nil {
		return fmt.Errorf("forget host %s: %w", id, err)
	}
	return nil
}

// SelfFence reports whether a host must stop claiming and kill its
// soldiers: its last successful renewal (lastRenewOK, zero if none since
// it started) is selfFence old or older. A host that never renewed has no
// claim to work. Pass times from time.Now() of one process, whose
// monotonic readings make the difference immune to clock steps.
func SelfFence(lastRenewOK, now time.Time, selfFence time.Duration) bool {
	if lastRenewOK.IsZero() {
		return true
	}
	return now.Sub(lastRenewOK) >= selfFence
}

// TakeoverDue reports whether h has been silent for takeover: its age when
// listed plus the time since (by the reader's clock). A negative gap (now
// before ListedAt) counts as none.
func TakeoverDue(h Host, now time.Time, takeover time.Duration) bool {
	silent := h.Age
	if since := now.Sub(h.ListedAt); since > 0 {
		silent += since
	}
	return silent >= takeover
}
