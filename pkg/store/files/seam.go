package files

import (
	"context"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Emit appends one line to logs/events.log (one write(2), O_APPEND, under
// the rotate lock): an event outside a transaction needs no journal.
func (s *Store) Emit(ctx context.Context, typ, actor string, data any) error {
	if s.ro {
		return ErrReadOnly
	}
	raw, err := store.EncodeData(data)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	return s.log.Append(typ, actor, raw)
}

// Changes returns nil: on one machine the roles see changes in the
// directories they watch (fsnotify), which no announcement would speed up.
func (s *Store) Changes(context.Context) <-chan string { return nil }

// RenewHost records nothing: the one machine is its own registry, and a
// write that cannot fail needs no row.
func (s *Store) RenewHost(_ context.Context, id, _ string, _ time.Time) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("renew host: %w", err)
	}
	return nil
}

// Hosts returns this machine, alive.
func (s *Store) Hosts(context.Context, time.Duration) ([]store.Host, error) {
	now := time.Now()
	return []store.Host{{ID: s.host, StartedAt: s.opened, RenewedAt: now, ListedAt: now, Alive: true}}, nil
}

// ForgetHost refuses: the one machine cannot be forgotten by itself.
func (s *Store) ForgetHost(_ context.Context, id string) error {
	return fmt.Errorf("forget host %s: the files store has one host, this machine (%s)", id, s.host)
}
