package operator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// doctorLockClass is the advisory lock class of the pooler probe, apart
// from the store's own classes.
const doctorLockClass = 0x4b44_00ff

// storeDoctorTimeout bounds the whole PostgreSQL check.
const storeDoctorTimeout = 20 * time.Second

// storeChecks checks store.kind postgres as the roles will meet it (SPEC
// §11.7): the DSN variable (by name), that the server answers, its
// version, TCP keepalives on our sessions, and that no transaction pooler
// sits between us and the server. from says where a variable came from.
func storeChecks(ctx context.Context, cfg config.Store, from func(...string) string) []Check {
	dsn := os.Getenv(cfg.DSNEnv)
	cs := []Check{{Name: "postgres dsn", OK: dsn != "", Info: from(cfg.DSNEnv),
		Fix: "set " + cfg.DSNEnv + " (store.dsn_env) in " + config.EnvFile + " (mode 0600) or in start's environment"}}
	if dsn == "" {
		return cs
	}
	ctx, cancel := context.WithTimeout(ctx, storeDoctorTimeout)
	defer cancel()
	a, err := pg.Connect(ctx, dsn)
	info := "the server answers (DSN from " + cfg.DSNEnv + ")"
	if err != nil {
		// pgx names host, user and database, never the password; the
		// redactor drops the DSN's value should it appear whole.
		info = logging.Redact(err.Error())
	}
	cs = append(cs, Check{Name: "postgres reachable", OK: err == nil, Info: info,
		Fix: "start the server, or correct " + cfg.DSNEnv + " (host, port, user, database, password) and pg_hba.conf for this host"})
	if err != nil {
		return cs
	}
	defer a.Close(ctx)
	cs = append(cs, versionCheck(ctx, a), keepaliveCheck(ctx, a, cfg.SelfFence()))
	return append(cs, poolerCheck(ctx, a, dsn))
}

// versionCheck: PostgreSQL 14 or newer (pg_snapshot_xmin, xid8).
func versionCheck(ctx context.Context, c *pgx.Conn) Check {
	ck := Check{Name: "postgres version", Fix: "upgrade the server to PostgreSQL 14 or newer"}
	var s string
	if err := c.QueryRow(ctx, "SHOW server_version_num").Scan(&s); err != nil {
		ck.Info = "SHOW server_version_num: " + err.Error()
		return ck
	}
	n, _ := strconv.Atoi(s)
	ck.OK = n >= 140000
	ck.Info = fmt.Sprintf("%d.%d (need 14 or newer)", n/10000, n%10000)
	return ck
}

// keepaliveCheck reads the server's keepalives on this session (effective
// values: the OS default when unset). A leader's advisory lock outlives
// its host's death until the server notices the silent connection, so
// idle + interval × count is how long a failover can wait.
func keepaliveCheck(ctx context.Context, c *pgx.Conn, selfFence time.Duration) Check {
	ck := Check{Name: "postgres keepalives",
		Fix: "on the server: ALTER SYSTEM SET tcp_keepalives_idle = 5; ALTER SYSTEM SET tcp_keepalives_interval = 2; " +
			"ALTER SYSTEM SET tcp_keepalives_count = 3; SELECT pg_reload_conf(); (Kingdom's side uses 5/2/3 unless the DSN sets keepalives_idle, keepalives_interval, keepalives_count)"}
	var unix bool
	var idle, interval, count int
	err := c.QueryRow(ctx, "SELECT inet_server_addr() IS NULL").Scan(&unix)
	if err == nil && !unix {
		err = c.QueryRow(ctx, `SELECT
			(SELECT setting::int FROM pg_settings WHERE name='tcp_keepalives_idle'),
			(SELECT setting::int FROM pg_settings WHERE name='tcp_keepalives_interval'),
			(SELECT setting::int FROM pg_settings WHERE name='tcp_keepalives_count')`).Scan(&idle, &interval, &count)
	}
	if err != nil {
		ck.Info = "read keepalive settings: " + err.Error()
		return ck
	}
	ck.OK, ck.Warn, ck.Info = judgeKeepalives(unix, idle, interval, count, selfFence)
	return ck
}

// judgeKeepalives: a dead client is noticed after idle + interval×count
// seconds. Past self_fence_seconds it fails (the leaders of a lost host
// stay locked longer than the host itself waits before fencing); past a
// minute it warns.
func judgeKeepalives(unix bool, idle, interval, count int, selfFence time.Duration) (ok, warn bool, info string) {
	if unix {
		return true, false, "unix socket: TCP keepalives do not apply"
	}
	if idle <= 0 || interval <= 0 || count <= 0 {
		return false, false, fmt.Sprintf("tcp_keepalives idle %d, interval %d, count %d: off on this session", idle, interval, count)
	}
	detect := time.Duration(idle+interval*count) * time.Second
	info = fmt.Sprintf("server notices a dead connection in %s (idle %d s, interval %d s, count %d)", detect, idle, interval, count)
	switch {
	case detect > selfFence:
		return false, false, info + ": longer than store.self_fence_seconds, a lost leader's lock blocks failover that long"
	case detect > time.Minute:
		return true, true, info
	}
	return true, false, info
}

// poolerCheck: a transaction pooler (PgBouncer pool_mode=transaction)
// hands each transaction of one client connection to any server backend,
// so a session advisory lock (the leader's) stays on a backend the leader
// no longer talks to. Directly connected, one connection keeps one
// backend, and the lock it takes is seen from a second connection under
// that backend's pid.
func poolerCheck(ctx context.Context, a *pgx.Conn, dsn string) Check {
	ck := Check{Name: "postgres pooler",
		Fix: "point the DSN straight at PostgreSQL (or a session-mode pooler): leaders hold session advisory locks, which a transaction pooler breaks"}
	pid := func() (int32, error) {
		var p int32
		err := pgx.BeginFunc(ctx, a, func(tx pgx.Tx) error { return tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p) })
		return p, err
	}
	pid1, err := pid()
	var pid2, holder int32
	if err == nil {
		pid2, err = pid()
	}
	key := rand.Int32()
	var locked bool
	if err == nil {
		err = a.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", doctorLockClass, key).Scan(&locked)
	}
	if err == nil && locked {
		defer a.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, $2)", doctorLockClass, key)
		var b *pgx.Conn
		if b, err = pg.Connect(ctx, dsn); err == nil {
			err = b.QueryRow(ctx, `SELECT coalesce((SELECT pid FROM pg_locks WHERE locktype='advisory' AND granted AND objsubid=2
				AND database=(SELECT oid FROM pg_database WHERE datname=current_database())
				AND classid=$1::int4::oid AND objid=$2::int4::oid LIMIT 1), 0)`, doctorLockClass, key).Scan(&holder)
			b.Close(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		ck.Info = "probe: " + logging.Redact(err.Error())
		return ck
	}
	ck.OK, ck.Info = judgePooler(pid1, pid2, locked, holder)
	return ck
}

// judgePooler decides the pooler probe: two transactions on one
// connection ran in backends pid1 and pid2; the session lock (locked) was
// seen from another connection held by holder (0: not seen).
func judgePooler(pid1, pid2 int32, locked bool, holder int32) (bool, string) {
	switch {
	case pid1 != pid2:
		return false, fmt.Sprintf("one connection ran two transactions in backends %d and %d: a transaction pooler", pid1, pid2)
	case !locked:
		return false, "a session advisory lock could not be taken"
	case holder != pid1:
		return false, fmt.Sprintf("the session lock taken by backend %d is held by %d as a second connection sees it: a pooler in between", pid1, holder)
	}
	return true, fmt.Sprintf("direct session (backend %d keeps its session lock across transactions)", pid1)
}
