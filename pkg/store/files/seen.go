package files

import (
	"context"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Seen reports whether id was ever admitted (the seen index), without
// admitting it.
func (s *Store) Seen(ctx context.Context, id string) (bool, error) {
	if err := store.Check("events", "", id); err != nil {
		return false, err
	}
	return s.adm.Seen(id), nil
}
