// Package pg is the PostgreSQL store (SPEC §11.7 kind: postgres), shared by
// every host of a cluster. It uses jackc/pgx v5 with hand-written SQL.
//
// Open connects a pool, then applies the embedded migrations
// (migrations/NNN_name.sql, recorded in schema_migrations) under a session
// advisory lock, so the first role to connect migrates and the others wait
// for it.
//
// Rules the SQL keeps:
//   - A document is one row keyed (queue, id); its state is a column.
//     Put-once is INSERT … ON CONFLICT DO NOTHING, so a duplicate in any
//     state is refused. A claim is UPDATE … WHERE state = from, recording
//     the holder and attempt; ClaimNext picks its row with FOR UPDATE SKIP
//     LOCKED. Finish moves a row only WHERE holder and attempt match.
//   - The event log is a table. Each row carries the xid8 of the
//     transaction that wrote it; a reader delivers only rows whose xid is
//     below pg_snapshot_xmin(pg_current_snapshot()) — every transaction
//     that could still add a smaller (xid, id) has ended — ordered by
//     (xid, id), and its cursor is the last (xid, id) delivered. Ids from
//     a sequence commit out of order, so "id > last" would skip a row
//     whose transaction commits late; this rule never does. A long-open
//     transaction anywhere on the server holds the log back until it ends.
//   - Leadership is a session advisory lock taken on a dedicated pgx.Conn
//     (never a pooled one: a pool recycles connections and would drop the
//     lock silently) plus a row in leaders whose epoch grows with every
//     acquisition. The lease pings its connection every LeaseCheck; the
//     first failure closes Lost. A fenced transaction re-reads the epoch
//     row FOR SHARE at commit, so a deposed leader's write never lands.
//   - Every committed change is announced on the NOTIFY channel
//     "kingdom" (Changes): "<queue>/<state>" for a document written or
//     moved into a state (a claim's destination, "<queue>/rejected",
//     Admit's "events/pending"), "kv/<ns>" for a key-value Set or Delete.
//     pg_notify runs inside the change's transaction, so PostgreSQL
//     delivers it at commit and drops it on rollback; each payload is sent
//     once per transaction. A notification only wakes a reader early: the
//     rows stay the truth, and one that is missed costs a poll interval.
//
// TCP keepalives: pgx does not read libpq's keepalives_* parameters, so
// Open takes them from the DSN itself (keepalives=0|1, keepalives_idle,
// keepalives_interval, keepalives_count, in seconds) and sets them on the
// dialer; without them it uses idle 5, interval 2, count 3, so a cut link
// is noticed in about 11 s instead of two hours. Set the same three as
// tcp_keepalives_* on the server.
package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Advisory lock classes (the first key of the two-int form).
const (
	lockMigrate = 0x4b44_0001
	lockLeader  = 0x4b44_0002
	lockKey     = 0x4b44_0003 // a key-value key's read-modify-write
)

// Store is a PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	conn *pgx.ConnConfig // for dedicated (leader) connections
	host string
	// stall is Options.LeaderStall.
	stall time.Duration
	// LeaseCheck is how often a lease pings its connection (default 1 s).
	LeaseCheck time.Duration
}

var _ store.Store = (*Store)(nil)

// Options tune a process's connections; the zero value is the defaults.
type Options struct {
	// AppName is every connection's application_name (pg_stat_activity
	// names the role and host: kingdom-<role>@<host>); the DSN's own
	// application_name wins.
	AppName string
	// ConnectTimeout bounds each connection attempt when the DSN names no
	// connect_timeout (default 10 s): a server that accepts and never
	// answers is an error, not a hang.
	ConnectTimeout time.Duration
	// LeaderStall: a leader whose lease was not renewed (Lease.Renew) for
	// this long is ended by a standby that asks to lead (0: never).
	LeaderStall time.Duration
	// MaxConns caps the pool (default 3: a role runs a few store calls at
	// once; leases and the listener have connections of their own).
	MaxConns int32
}

// Open connects to dsn as host (the holder name written into claims and
// leaders) and migrates the schema.
func Open(ctx context.Context, dsn, host string, opts ...Options) (*Store, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 3
	}
	if err := ids.Check(host); err != nil {
		return nil, fmt.Errorf("open postgres store: host id: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN, which can hold a password.
		return nil, errors.New("open postgres store: the DSN does not parse")
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	}
	if err := keepalives(cfg.ConnConfig); err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set && o.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.AppName
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	s := &Store{conn: cfg.ConnConfig.Copy(), host: host, stall: o.LeaderStall, LeaseCheck: time.Second}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s.pool = pool
	return s, nil
}

// keepalives moves libpq's keepalive parameters from the runtime
// parameters (pgx would send them to the server, which refuses them) onto
// the dialer.
func keepalives(cc *pgx.ConnConfig) error {
	ka := net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}
	for key, dst := range map[string]*time.Duration{"keepalives_idle": &ka.Idle, "keepalives_interval": &ka.Interval} {
		if v, ok := cc.RuntimeParams[key]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("dsn %s=%q: want seconds", key, v)
			}
			*dst = time.Duration(n) * time.Second
			delete(cc.RuntimeParams, key)
		}
	}
	if v, ok := cc.RuntimeParams["keepalives_count"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("dsn keepalives_count=%q: want a count", v)
		}
		ka.Count = n
		delete(cc.RuntimeParams, "keepalives_count")
	}
	if v, ok := cc.RuntimeParams["keepalives"]; ok {
		ka.Enable = v != "0"
		delete(cc.RuntimeParams, "keepalives")
	}
	d := &net.Dialer{Timeout: cc.ConnectTimeout, KeepAliveConfig: ka}
	if !ka.Enable {
		d.KeepAlive = -1
	}
	cc.DialFunc = d.DialContext
	return nil
}

// Close closes the pool (leases have their own connections).
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool returns the connection pool (operators' checks, benchmarks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) migrate(ctx context.Context) error {
	c, err := pgx.ConnectConfig(ctx, s.conn.Copy())
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1, 0)", lockMigrate); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	// Closing the connection releases the lock too; unlock for a clean log.
	defer c.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, 0)", lockMigrate)
	if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	ents, err := migrations.ReadDir("migrations")
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	known := 0
	for _, e := range ents {
		if v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0]); err == nil {
			known = max(known, v)
		}
	}
	// A database a newer binary migrated has columns and rules this one
	// does not know (an admit would fail on a NOT NULL column it never
	// fills): refuse it, naming both versions (SPEC §12.2).
	var newest int
	if err := c.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&newest); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if newest > known {
		return fmt.Errorf("migrate: the database's schema is version %d, newer than this binary's %d: upgrade this host's Kingdom (every host runs the same release)", newest, known)
	}
	for _, e := range ents {
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return fmt.Errorf("migrate: migration %s has no version prefix", e.Name())
		}
		var done bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version=$1)", v).Scan(&done); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if done {
			continue
		}
		sql, _ := migrations.ReadFile("migrations/" + e.Name())
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", e.Name(), err)
		}
	}
	return nil
}

const docCols = "queue, state, id, priority, created_at, data, coalesce(reason, ''), coalesce(holder, ''), coalesce(attempt, 0)"

// scanDoc scans docCols, then into extra (nil skips a column).
func scanDoc(r pgx.Row, extra ...any) (store.Doc, error) {
	var d store.Doc
	err := r.Scan(append([]any{&d.Queue, &d.State, &d.ID, &d.Priority, &d.CreatedAt, &d.Data, &d.Reason, &d.Claim.Holder, &d.Claim.Attempt}, extra...)...)
	return d, err
}

// Get returns id of queue q.
func (s *Store) Get(ctx context.Context, q, id string) (store.Doc, error) {
	if err := store.Check(q, "", id); err != nil {
		return store.Doc{}, err
	}
	d, err := scanDoc(s.pool.QueryRow(ctx, "SELECT "+docCols+" FROM docs WHERE queue=$1 AND id=$2", q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("get %s %s: %w", q, id, store.ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("get %s %s: %w", q, id, err)
	}
	return d, nil
}

// List returns the documents of a state in dispatch order.
func (s *Store) List(ctx context.Context, q, state string) ([]store.Doc, error) {
	if err := store.Check(q, state, "x"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT "+docCols+" FROM docs WHERE queue=$1 AND state=$2 ORDER BY prio, created_at, id", q, state)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", q, state, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Doc, error) { return scanDoc(r) })
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", q, state, err)
	}
	return out, nil
}

// Claim moves id from → to for c; a loser's UPDATE matches no row.
func (s *Store) Claim(ctx context.Context, q, from, to, id string, c store.Claim) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	if err := store.Check(q, to, id); err != nil {
		return err
	}
	// The notification rides in the RETURNING list: it is sent only when a
	// row moved, and delivered at the statement's commit.
	tag, err := s.pool.Exec(ctx, `UPDATE docs SET state=$4, holder=$5, attempt=$6, updated_at=now()
		WHERE queue=$1 AND id=$2 AND state=$3 RETURNING pg_notify($7, $8)`,
		q, id, from, to, c.Holder, c.Attempt, channel, q+"/"+to)
	if err != nil {
		return fmt.Errorf("claim %s %s: %w", q, id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("claim %s %s: %w", q, id, store.ErrTaken)
	}
	return nil
}

// ClaimNext claims the first row of from in List order that no other
// claimant has locked.
func (s *Store) ClaimNext(ctx context.Context, q, from, to string, c store.Claim) (store.Doc, error) {
	if err := store.Check(q, from, "x"); err != nil {
		return store.Doc{}, err
	}
	if err := store.Check(q, to, "x"); err != nil {
		return store.Doc{}, err
	}
	d, err := scanDoc(s.pool.QueryRow(ctx, `UPDATE docs SET state=$3, holder=$4, attempt=$5, updated_at=now()
		WHERE (queue, id) = (SELECT queue, id FROM docs WHERE queue=$1 AND state=$2
			ORDER BY prio, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+docCols+`, pg_notify($6, $7)`, q, from, to, c.Holder, c.Attempt, channel, q+"/"+to), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("claim next %s/%s: %w", q, from, store.ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("claim next %s/%s: %w", q, from, err)
	}
	return d, nil
}

// Admit records id in seen and queues the event, in one transaction.
func (s *Store) Admit(ctx context.Context, id string, data []byte) error {
	if err := store.Check("events", "pending", id); err != nil {
		return fmt.Errorf("admit event: %w", err)
	}
	prio, created, err := store.ParseHeader(data)
	if err != nil {
		return fmt.Errorf("admit %s: not a JSON object: %w", id, err)
	}
	dup := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO seen (id) VALUES ($1) ON CONFLICT DO NOTHING", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			dup = true
			return nil
		}
		tag, err = tx.Exec(ctx, insertDoc, "events", "pending", id, store.PriorityRank(prio), prio, createdAt(created), data)
		if err != nil {
			return err
		}
		// Queued before the seen index existed: a duplicate, now seen.
		dup = tag.RowsAffected() == 0
		if dup {
			return nil
		}
		return notify(ctx, tx, []string{"events/pending"})
	})
	if err != nil {
		return fmt.Errorf("admit %s: %w", id, err)
	}
	if dup {
		return fmt.Errorf("admit %s: %w", id, store.ErrDuplicate)
	}
	return nil
}

const insertDoc = `INSERT INTO docs (queue, state, id, prio, priority, created_at, data)
	VALUES ($1, $2, $3, $4, $5, coalesce($6, now()), $7) ON CONFLICT (queue, id) DO NOTHING`

// createdAt is nil (the row gets now()) for a document without created_at,
// as the file store falls back to the file's mtime.
func createdAt(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// Value returns one key-value entry.
func (s *Store) Value(ctx context.Context, ns, key string) ([]byte, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return nil, err
	}
	var v []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM kv WHERE ns=$1 AND key=$2", ns, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("value %s/%s: %w", ns, key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("value %s/%s: %w", ns, key, err)
	}
	return v, nil
}

// Values returns every entry of ns.
func (s *Store) Values(ctx context.Context, ns string) (map[string][]byte, error) {
	if err := store.CheckKey(ns, "x"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT key, value FROM kv WHERE ns=$1", ns)
	if err != nil {
		return nil, fmt.Errorf("values %s: %w", ns, err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("values %s: %w", ns, err)
		}
		out[k] = v
	}
	return out, rows.Err()
}
