package pg

import (
	"context"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Seen reports whether id was ever admitted, without admitting it (the
// Admitter's Seen and Known).
func (s *Store) Seen(ctx context.Context, id string) (bool, error) {
	if err := store.Check("events", "", id); err != nil {
		return false, err
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM seen WHERE id=$1)", id).Scan(&ok); err != nil {
		return false, fmt.Errorf("seen %s: %w", id, err)
	}
	return ok, nil
}
