package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// LeaderRoles run on one host at a time in store.kind postgres (SPEC
// §11.7): their runner takes the store's lease. Every other role keeps its
// lock file and runs on every host: the generals, the sentinel (its inbox;
// its pollers take the "sentinel-pollers" lease inside its tick) and the
// chamberlain (its resources and heartbeats; its cluster duties take the
// "chamberlain-cluster" lease inside its tick).
var LeaderRoles = []string{layout.RoleKing, layout.RoleEnvoy}

// IsLeaderRole reports whether role is one of LeaderRoles.
func IsLeaderRole(role string) bool {
	for _, r := range LeaderRoles {
		if r == role {
			return true
		}
	}
	return false
}

// storeConfig checks the store section before anything connects: the
// host id resolves and, in postgres mode, the DSN variable is set (named,
// never its value).
func storeConfig(cfg config.Store) (host string, err error) {
	host, err = cfg.ResolveHostID()
	if err != nil {
		return "", &ConfigError{Err: err}
	}
	if cfg.Kind == config.StorePostgres && os.Getenv(cfg.DSNEnv) == "" {
		return "", &ConfigError{Err: fmt.Errorf("store.kind postgres: %s is not set (put the DSN in %s or start's environment)", cfg.DSNEnv, config.EnvFile)}
	}
	return host, nil
}

// lazyStore is Env.Store: it opens the store of system.yaml on first use,
// with that call's context, and keeps it. In files mode a role that never
// uses it creates nothing (files.Open makes state/store); in postgres mode
// a database that is down at start-up is an error of the call that needed
// it (a standby's Lead retries it), not of Setup.
type lazyStore struct {
	// opener opens the configured store (store/open.Store, given by the
	// role's command through Env.SetStoreOpener: a binary that never opens
	// a store, soldier-spawn, links no database driver).
	opener func(context.Context, config.Store, layout.Layout) (store.Store, error)
	cfg    config.Store
	l      layout.Layout
	log    *slog.Logger // OpenStore's outage lines (nil: none)
	role   string       // whose outage record OpenStore writes ("": none)
	mu     sync.Mutex
	st     store.Store
	closed bool
	// life ends at Close: it bounds the listener (wake.go), which must
	// not outlive the store it listens on.
	life      context.Context
	end       context.CancelFunc
	listening bool
	subs      []wakeSub
}

var _ store.Store = (*lazyStore)(nil)

// stores are the stores Setup made, closed by MainFunc on exit.
var stores struct {
	sync.Mutex
	all []*lazyStore
}

func newLazyStore(cfg config.Store, l layout.Layout) *lazyStore {
	s := &lazyStore{cfg: cfg, l: l}
	s.life, s.end = context.WithCancel(context.Background())
	stores.Lock()
	stores.all = append(stores.all, s)
	stores.Unlock()
	return s
}

func closeStores() {
	stores.Lock()
	all := stores.all
	stores.all = nil
	stores.Unlock()
	for _, s := range all {
		s.Close()
	}
}

// bound gives ctx the store's call timeout (store.call_timeout_seconds)
// unless it already ends sooner: no store call waits for ever on a
// database that does not answer (SPEC §12.1).
func (s *lazyStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.cfg.CallTimeout()
	if d <= 0 {
		d = 10 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// open returns the opened store, opening it now if needed.
func (s *lazyStore) open(ctx context.Context) (store.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("open store: closed")
	}
	if s.st == nil {
		if s.opener == nil {
			return nil, errors.New("open store: this command opens no store")
		}
		st, err := s.opener(ctx, s.cfg, s.l)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	return s.st, nil
}

// OpenStore returns the store behind st (Env.Store), opened: a
// *files.Store or a *pg.Store.
//
// A store that cannot be reached (store.Unreachable) is waited for, not
// failed (SPEC §12.2): OpenStore retries with backoff, 1 s doubling to
// 4 s, logging the outage once, until the store opens or ctx ends. A role
// started while its database is down comes up when the database does.
// openBackoffMax caps OpenStore's wait between attempts.
const openBackoffMax = 4 * time.Second

func OpenStore(ctx context.Context, st store.Store) (store.Store, error) {
	ls, ok := st.(*lazyStore)
	if !ok {
		return st, nil
	}
	wait := time.Second
	var since time.Time
	for {
		inner, err := ls.open(ctx)
		if err == nil || !store.Unreachable(err) || ctx.Err() != nil {
			if err == nil && !since.IsZero() && ls.log != nil {
				ls.log.Info("store reachable again", "after", time.Since(since).Round(time.Second).String())
			}
			return inner, err
		}
		if since.IsZero() {
			since = time.Now()
			if ls.log != nil {
				ls.log.Error("store unreachable at start; waiting for it", "err", err)
			}
			ls.recordOutage(since, err)
			defer ls.endOutage()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		// Capped at 4 s, not the ticks' 30 s: nothing wakes a role that
		// has not started, and it must come up within 5 s of the store's
		// return (SPEC §12.2); one connection attempt is cheap.
		wait = min(2*wait, openBackoffMax)
	}
}

// recordOutage writes the role's outage record (layout.StoreUnreachable,
// the runner's format) while OpenStore waits, so the verdict names the
// store for a role that has not started ticking yet.
func (s *lazyStore) recordOutage(since time.Time, err error) {
	if s.role == "" {
		return
	}
	rec := map[string]string{"since": since.UTC().Format(time.RFC3339), "error": redact.String(err.Error())}
	if b, jerr := json.Marshal(rec); jerr == nil {
		_ = atomicfile.WriteFile(s.l.StoreUnreachable(s.role), append(b, '\n'), 0o600)
	}
}

func (s *lazyStore) endOutage() {
	if s.role != "" {
		_ = os.Remove(s.l.StoreUnreachable(s.role))
	}
}

// call runs fn on the opened store within the call timeout (bound).
func call[T any](s *lazyStore, ctx context.Context, fn func(context.Context, store.Store) (T, error)) (T, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	st, err := s.open(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(ctx, st)
}

// do is call for a method that returns only an error.
func do(s *lazyStore, ctx context.Context, fn func(context.Context, store.Store) error) error {
	_, err := call(s, ctx, func(ctx context.Context, st store.Store) (struct{}, error) { return struct{}{}, fn(ctx, st) })
	return err
}

func (s *lazyStore) Get(ctx context.Context, q, id string) (store.Doc, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (store.Doc, error) { return st.Get(ctx, q, id) })
}

func (s *lazyStore) List(ctx context.Context, q, state string) ([]store.Doc, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) ([]store.Doc, error) { return st.List(ctx, q, state) })
}

func (s *lazyStore) Claim(ctx context.Context, q, from, to, id string, c store.Claim) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.Claim(ctx, q, from, to, id, c) })
}

func (s *lazyStore) ClaimNext(ctx context.Context, q, from, to string, c store.Claim) (store.Doc, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (store.Doc, error) { return st.ClaimNext(ctx, q, from, to, c) })
}

func (s *lazyStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.Update(ctx, fn) })
}

func (s *lazyStore) Admit(ctx context.Context, id string, data []byte) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.Admit(ctx, id, data) })
}

func (s *lazyStore) Events(ctx context.Context, cur store.Cursor, max int) ([]store.Event, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) ([]store.Event, error) { return st.Events(ctx, cur, max) })
}

func (s *lazyStore) Lead(ctx context.Context, name string) (store.Lease, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (store.Lease, error) { return st.Lead(ctx, name) })
}

func (s *lazyStore) Value(ctx context.Context, ns, key string) ([]byte, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) ([]byte, error) { return st.Value(ctx, ns, key) })
}

func (s *lazyStore) Values(ctx context.Context, ns string) (map[string][]byte, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (map[string][]byte, error) { return st.Values(ctx, ns) })
}

func (s *lazyStore) Emit(ctx context.Context, typ, actor string, data any) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.Emit(ctx, typ, actor, data) })
}

func (s *lazyStore) Leaders(ctx context.Context) (map[string]store.LeaderInfo, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (map[string]store.LeaderInfo, error) { return st.Leaders(ctx) })
}

// Changes subscribes to every announcement (the roles' wakes use
// RunnerOptions instead, which opens the store in the background).
func (s *lazyStore) Changes(ctx context.Context) <-chan string {
	st, err := s.open(ctx)
	if err != nil {
		return nil
	}
	return st.Changes(ctx)
}

func (s *lazyStore) RenewHost(ctx context.Context, id, version string, started time.Time) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.RenewHost(ctx, id, version, started) })
}

func (s *lazyStore) Hosts(ctx context.Context, selfFence time.Duration) ([]store.Host, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) ([]store.Host, error) { return st.Hosts(ctx, selfFence) })
}

func (s *lazyStore) ForgetHost(ctx context.Context, id string) error {
	return do(s, ctx, func(ctx context.Context, st store.Store) error { return st.ForgetHost(ctx, id) })
}

// TrimEvents keeps its caller's deadline (a daily job that may delete a
// day's rows bounds itself), not the per-call timeout.
func (s *lazyStore) TrimEvents(ctx context.Context, now time.Time, keep time.Duration) (int, error) {
	st, err := s.open(ctx)
	if err != nil {
		return 0, err
	}
	return st.TrimEvents(ctx, now, keep)
}

func (s *lazyStore) EventHorizon(ctx context.Context) (store.Horizon, error) {
	return call(s, ctx, func(ctx context.Context, st store.Store) (store.Horizon, error) { return st.EventHorizon(ctx) })
}

// Close closes the store if it was opened; later calls fail.
func (s *lazyStore) Close() error {
	s.end() // first: an open in progress for the listener gives up the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.st == nil {
		return nil
	}
	err := s.st.Close()
	s.st = nil
	return err
}

// SetStoreOpener gives Env.Store the function that opens the configured
// store (store/open.Store); roles set it right after Setup.
func (e *Env) SetStoreOpener(fn func(context.Context, config.Store, layout.Layout) (store.Store, error)) {
	if ls, ok := e.Store.(*lazyStore); ok {
		ls.mu.Lock()
		ls.opener = fn
		ls.mu.Unlock()
	}
}
