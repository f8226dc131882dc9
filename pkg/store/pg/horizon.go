package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// EventHorizon counts the event log's rows below no reader's horizon yet
// (their xid at or past pg_snapshot_xmin, the oldest transaction still
// open on the server) with the age of the oldest, and names the oldest
// open transaction of the whole server from pg_stat_activity: every
// database's backends show there, and backend_xid to any user (its
// xact_start only to its own user or pg_read_all_stats).
func (s *Store) EventHorizon(ctx context.Context) (store.Horizon, error) {
	var h store.Horizon
	var heldFor float64
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(ts)), 0)::float8
		FROM event_log WHERE xid >= pg_snapshot_xmin(pg_current_snapshot())`).Scan(&h.Held, &heldFor)
	if err != nil {
		return store.Horizon{}, fmt.Errorf("event log horizon: %w", err)
	}
	h.HeldFor = time.Duration(heldFor * float64(time.Second))
	var xid, db, app string
	var pid int
	var since *time.Time
	err = s.pool.QueryRow(ctx, `SELECT backend_xid::text, pid, coalesce(datname, ''), coalesce(application_name, ''), xact_start
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
		ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&xid, &pid, &db, &app, &since)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return h, nil
	case err != nil:
		return store.Horizon{}, fmt.Errorf("oldest open transaction: %w", err)
	}
	h.Oldest = fmt.Sprintf("xid %s, pid %d", xid, pid)
	if db != "" {
		h.Oldest += ", database " + db
	}
	if app != "" {
		h.Oldest += ", application " + app
	}
	if since != nil {
		h.Since = *since
	}
	return h, nil
}
