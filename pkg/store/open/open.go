// Package open picks a role's store from system.yaml store (SPEC §11.6):
// kind files opens the files under the base dir, kind postgres connects to
// the database named by the DSN variable as this host. It lives apart from
// package store because it imports both implementations.
//
//	st, err := open.Store(ctx, sys.Store, l) // after config.ApplySecrets
package open

import (
	"context"
	"fmt"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// Store opens the store cfg names. The DSN is read from the environment
// (config.ApplySecrets has put kingdom.env's secrets there); errors name
// its variable, never its value.
func Store(ctx context.Context, cfg config.Store, l layout.Layout) (store.Store, error) {
	host, err := cfg.ResolveHostID()
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	switch cfg.Kind {
	case config.StoreFiles, "":
		open := files.Open
		if cfg.ReadOnly {
			open = files.OpenReadOnly
		}
		st, err := open(l, host)
		if err != nil {
			return nil, fmt.Errorf("open file store: %w", err)
		}
		return st, nil
	case config.StorePostgres:
		dsn := os.Getenv(cfg.DSNEnv)
		if dsn == "" {
			return nil, fmt.Errorf("open postgres store: %s is not set (put the DSN in kingdom.env or start's environment)", cfg.DSNEnv)
		}
		st, err := pg.Open(ctx, dsn, host, pg.Options{AppName: cfg.AppName, ConnectTimeout: cfg.ConnectTimeout(), LeaderStall: cfg.LeaderStall()})
		if err != nil {
			return nil, fmt.Errorf("open postgres store (DSN from %s, host %s): %w", cfg.DSNEnv, host, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("open store: unknown store.kind %q", cfg.Kind)
}
