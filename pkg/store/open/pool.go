package open

import (
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Pool returns the PostgreSQL pool behind an opened store (the hosts
// registry, checks); an error for the file store.
func Pool(st store.Store) (*pgxpool.Pool, error) {
	p, ok := st.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return nil, errors.New("store has no PostgreSQL pool (store.kind is not postgres)")
	}
	return p.Pool(), nil
}
