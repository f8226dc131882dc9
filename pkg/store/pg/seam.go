package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Emit appends one event-log row in a transaction of its own.
func (s *Store) Emit(ctx context.Context, typ, actor string, data any) error {
	return s.Update(ctx, func(tx store.Tx) error { return tx.Emit(typ, actor, data) })
}

// RenewHost records that host id is alive, running version since started.
// A restarted host replaces its started_at and version. renewed_at is the
// database's clock, so hosts' clocks never need to agree.
func (s *Store) RenewHost(ctx context.Context, id, version string, started time.Time) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("renew host: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO hosts (host_id, started_at, renewed_at, version) VALUES ($1, $2, now(), $3)
		ON CONFLICT (host_id) DO UPDATE SET started_at=EXCLUDED.started_at, renewed_at=now(), version=EXCLUDED.version`,
		id, started, version)
	if err != nil {
		return fmt.Errorf("renew host %s: %w", id, err)
	}
	return nil
}

// Hosts returns every host, by id, with its age by the database's clock;
// Alive is age < selfFence.
func (s *Store) Hosts(ctx context.Context, selfFence time.Duration) ([]store.Host, error) {
	rows, err := s.pool.Query(ctx, `SELECT host_id, started_at, renewed_at, version,
		greatest(extract(epoch FROM now() - renewed_at), 0)::float8 FROM hosts ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	listed := time.Now()
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Host, error) {
		var h store.Host
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

// ForgetHost removes a host from the registry (a host retired for good;
// one that renews again comes back).
func (s *Store) ForgetHost(ctx context.Context, id string) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("forget host: %w", err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM hosts WHERE host_id=$1", id); err != nil {
		return fmt.Errorf("forget host %s: %w", id, err)
	}
	return nil
}
