package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Lead takes the named leadership on a dedicated connection: a session
// advisory lock, then the next epoch in leaders.
func (s *Store) Lead(ctx context.Context, name string) (store.Lease, error) {
	if err := ids.Check(name); err != nil {
		return nil, fmt.Errorf("lead: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, s.conn.Copy())
	if err != nil {
		return nil, fmt.Errorf("lead %s: connect: %w", name, err)
	}
	ok, err := tryLock(ctx, c, name)
	if err == nil && !ok && s.stall > 0 {
		ok, err = s.endStalled(ctx, c, name)
	}
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("lead %s: %w", name, err)
	}
	if !ok {
		c.Close(ctx)
		return nil, fmt.Errorf("lead %s: %w", name, store.ErrHeld)
	}
	epoch, err := s.nextEpoch(ctx, c, name)
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("lead %s: epoch: %w", name, err)
	}
	every := s.LeaseCheck
	if every <= 0 {
		every = time.Second
	}
	l := &lease{s: s, name: name, epoch: epoch, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	// The lease outlives Lead's call: its pings keep the caller's values,
	// not its deadline.
	go l.watch(context.WithoutCancel(ctx), c, every)
	return l, nil
}

// clearBlockersAfter is how long the epoch bump waits before it ends the
// sessions that block it.
const clearBlockersAfter = time.Second

// nextEpoch writes the next epoch of name on c, which holds its lock. The
// bump waits for every transaction that holds the row FOR SHARE (a fenced
// commit of the previous holder, tx.go). One the previous holder left open
// (a frozen process caught between its fence and its commit: its pool
// connection stays up after its lease session was ended) would hold the
// new leader back for ever, so after clearBlockersAfter the sessions
// blocking the bump are ended: each is a commit of an older epoch of this
// name (this lock is ours now) or a renewal of one, which may fail but must
// never succeed after the bump.
func (s *Store) nextEpoch(ctx context.Context, c *pgx.Conn, name string) (int64, error) {
	type bumped struct {
		epoch int64
		err   error
	}
	pid := c.PgConn().PID()
	done := make(chan bumped, 1)
	go func() {
		var b bumped
		b.err = c.QueryRow(ctx, `INSERT INTO leaders (name, epoch, holder, renewed_at, backend_pid) VALUES ($1, 1, $2, now(), pg_backend_pid())
			ON CONFLICT (name) DO UPDATE SET epoch=leaders.epoch+1, holder=EXCLUDED.holder, acquired_at=now(),
				renewed_at=now(), backend_pid=EXCLUDED.backend_pid
			RETURNING epoch`, name, s.host).Scan(&b.epoch)
		done <- b
	}()
	t := time.NewTicker(clearBlockersAfter)
	defer t.Stop()
	for {
		select {
		case b := <-done:
			return b.epoch, b.err
		case <-t.C:
		}
		// c is busy with the bump: ask on the pool. A failure here only
		// means the bump goes on waiting (until ctx ends).
		_, _ = s.pool.Exec(ctx, "SELECT pg_terminate_backend(b) FROM unnest(pg_blocking_pids($1)) b", int32(pid))
	}
}

// lease owns its connection: only watch uses it after Lead returns (a
// pgx.Conn is not safe for concurrent use).
type lease struct {
	s     *Store
	name  string
	epoch int64
	lost  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (l *lease) Name() string          { return l.name }
func (l *lease) Epoch() int64          { return l.epoch }
func (l *lease) Lost() <-chan struct{} { return l.lost }

// watch pings the session every period; the first failure means the lock
// may be gone (the server frees it when it sees the session end), so the
// lease is lost at once.
func (l *lease) watch(base context.Context, c *pgx.Conn, every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			ctx, cancel := context.WithTimeout(base, 5*time.Second)
			// Unlock before closing: the server frees a closed session's
			// locks only when its backend has exited, a moment after Close
			// returns, and a successor asking at once must not be refused.
			c.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", lockLeader, l.name)
			c.Close(ctx) // ends the session: the lock goes with it anyway
			cancel()
			l.markLost()
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(base, every+2*time.Second)
			err := c.Ping(ctx)
			cancel()
			if err != nil {
				l.markLost()
				ctx, cancel := context.WithTimeout(base, time.Second)
				c.Close(ctx)
				cancel()
				return
			}
		}
	}
}

func (l *lease) markLost() { l.once.Do(func() { close(l.lost) }) }

// Renew records that the leader is making progress (the runner calls it
// after each tick): a standby ends a session whose row is older than
// leader_stall_seconds. A lease that lost its epoch renews nothing.
func (l *lease) Renew(ctx context.Context) error {
	_, err := l.s.pool.Exec(ctx, "UPDATE leaders SET renewed_at=now() WHERE name=$1 AND epoch=$2", l.name, l.epoch)
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.name, err)
	}
	return nil
}

func tryLock(ctx context.Context, c *pgx.Conn, name string) (bool, error) {
	var ok bool
	err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", lockLeader, name).Scan(&ok)
	return ok, err
}

// endStalled ends the session holding name when its leader has not renewed
// for the stall window (frozen, or hung in a tick while its connection
// stays up), then takes the lock: the server frees a terminated session's
// locks when its backend exits, a moment later, so the lock is asked for a
// few times over about a second. Only the session that holds the lock is
// ended: a row whose backend_pid is not the holder's (a new leader took
// the lock and has not yet written its row; the old pid reused by another
// backend) ends nothing.
func (s *Store) endStalled(ctx context.Context, c *pgx.Conn, name string) (bool, error) {
	var pid int32
	var ended bool
	err := c.QueryRow(ctx, `SELECT l.backend_pid, pg_terminate_backend(l.backend_pid) FROM leaders l
		WHERE l.name=$1 AND l.backend_pid <> 0 AND l.renewed_at < now() - make_interval(secs => $2)
		AND EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid=l.backend_pid AND k.locktype='advisory' AND k.granted AND k.objsubid=2
			AND k.database=(SELECT oid FROM pg_database WHERE datname=current_database())
			AND k.classid=$3::int4::oid AND k.objid=hashtext(l.name)::oid)`,
		name, s.stall.Seconds(), lockLeader).Scan(&pid, &ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end the stalled leader's session: %w", err)
	}
	if !ended {
		return false, nil
	}
	for range 20 {
		ok, err := tryLock(ctx, c, name)
		if ok || err != nil {
			return ok, err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
	return false, nil
}

// Release ends the session (and with it the lock).
func (l *lease) Release() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	return nil
}

// fence fails the commit unless the lease is live and its epoch is still
// the row's. FOR SHARE holds a new leader's epoch bump until this commit.
func (l *lease) fence(ctx context.Context, tx pgx.Tx) error {
	select {
	case <-l.lost:
		return fmt.Errorf("commit: lease %s epoch %d lost: %w", l.name, l.epoch, store.ErrFenced)
	default:
	}
	var epoch int64
	if err := tx.QueryRow(ctx, "SELECT epoch FROM leaders WHERE name=$1 FOR SHARE", l.name).Scan(&epoch); err != nil {
		return fmt.Errorf("commit: lease %s: %w", l.name, err)
	}
	if epoch != l.epoch {
		return fmt.Errorf("commit: lease %s epoch %d, now %d: %w", l.name, l.epoch, epoch, store.ErrFenced)
	}
	return nil
}

// Leaders returns every leadership ever taken, by name: its last holder
// and epoch from leaders, and whether a session holds its advisory lock in
// this database right now (a holder that died leaves its row behind).
func (s *Store) Leaders(ctx context.Context) (map[string]store.LeaderInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.name, l.epoch, l.holder, l.acquired_at,
		EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype='advisory' AND k.granted AND k.objsubid=2
			AND k.database=(SELECT oid FROM pg_database WHERE datname=current_database())
			AND k.classid=$1::int4::oid AND k.objid=hashtext(l.name)::oid)
		FROM leaders l`, lockLeader)
	if err != nil {
		return nil, fmt.Errorf("list leaders: %w", err)
	}
	out := map[string]store.LeaderInfo{}
	var name string
	var li store.LeaderInfo
	_, err = pgx.ForEachRow(rows, []any{&name, &li.Epoch, &li.Holder, &li.Since, &li.Held}, func() error {
		out[name] = li
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leaders: %w", err)
	}
	return out, nil
}

// Connect opens one connection to dsn configured as a lease's (the
// DSN's keepalives on the dialer), without migrating: for operators'
// checks (start doctor). Errors never quote the DSN.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("connect: the DSN does not parse")
	}
	if err := keepalives(cfg); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}
