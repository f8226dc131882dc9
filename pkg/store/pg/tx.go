package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// tx runs each change at once inside one PostgreSQL transaction.
type tx struct {
	ctx    context.Context
	tx     pgx.Tx
	leases []*lease
	err    error
	wakes  []string // payloads to notify at commit, each once
}

// wake records a payload for the commit's notification (Changes).
func (t *tx) wake(payload string) {
	if !slices.Contains(t.wakes, payload) {
		t.wakes = append(t.wakes, payload)
	}
}

// Update runs fn in one transaction (READ COMMITTED; every change is a
// conditional statement, so no read-then-write race needs more).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(ptx pgx.Tx) error {
		t := &tx{ctx: ctx, tx: ptx}
		if err := fn(t); err != nil {
			return err
		}
		if t.err != nil {
			return t.err
		}
		for _, l := range t.leases {
			if err := l.fence(ctx, ptx); err != nil {
				return err
			}
		}
		return notify(ctx, ptx, t.wakes)
	})
}

// notify queues the payloads on the Changes channel; PostgreSQL delivers
// them when the transaction commits, and never if it rolls back.
func notify(ctx context.Context, ptx pgx.Tx, payloads []string) error {
	if len(payloads) == 0 {
		return nil
	}
	if _, err := ptx.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) p", channel, payloads); err != nil {
		return fmt.Errorf("notify %v: %w", payloads, err)
	}
	return nil
}

func (t *tx) exec(sql string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(t.ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t *tx) PutOnce(q, state, id string, data []byte) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	prio, created, err := store.ParseHeader(data)
	if err != nil {
		return fmt.Errorf("put %s %s: not a JSON object: %w", q, id, err)
	}
	n, err := t.exec(insertDoc, q, state, id, store.PriorityRank(prio), prio, createdAt(created), data)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q, id, err)
	}
	if n == 0 {
		return fmt.Errorf("put %s %s: %w", q, id, store.ErrExists)
	}
	t.wake(q + "/" + state)
	return nil
}

// Put places id in state with data, wherever it was.
func (t *tx) Put(q, state, id string, data []byte) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	prio, created, err := store.ParseHeader(data)
	if err != nil {
		return fmt.Errorf("put %s %s: not a JSON object: %w", q, id, err)
	}
	_, err = t.exec(`INSERT INTO docs (queue, state, id, prio, priority, created_at, data)
		VALUES ($1, $2, $3, $4, $5, coalesce($6, now()), $7)
		ON CONFLICT (queue, id) DO UPDATE SET state=EXCLUDED.state, prio=EXCLUDED.prio,
			priority=EXCLUDED.priority, created_at=EXCLUDED.created_at, data=EXCLUDED.data,
			reason=NULL, updated_at=now()`,
		q, state, id, store.PriorityRank(prio), prio, createdAt(created), data)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", q, id, err)
	}
	t.wake(q + "/" + state)
	return nil
}

func (t *tx) Move(q, from, to, id string) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	if err := store.Check(q, to, id); err != nil {
		return err
	}
	n, err := t.exec("UPDATE docs SET state=$4, updated_at=now() WHERE queue=$1 AND id=$2 AND state=$3", q, id, from, to)
	if err != nil {
		return fmt.Errorf("move %s %s: %w", q, id, err)
	}
	if n == 0 {
		return fmt.Errorf("move %s %s %s→%s: %w", q, id, from, to, store.ErrNotFound)
	}
	t.wake(q + "/" + to)
	return nil
}

func (t *tx) Finish(q, from, to, id string, c store.Claim) error {
	if err := store.Check(q, from, id); err != nil {
		return err
	}
	if err := store.Check(q, to, id); err != nil {
		return err
	}
	n, err := t.exec(`UPDATE docs SET state=$4, holder=NULL, attempt=NULL, updated_at=now()
		WHERE queue=$1 AND id=$2 AND state=$3 AND holder=$5 AND attempt=$6`, q, id, from, to, c.Holder, c.Attempt)
	if err != nil {
		return fmt.Errorf("finish %s %s: %w", q, id, err)
	}
	if n == 0 {
		return fmt.Errorf("finish %s %s as %s attempt %d: %w", q, id, c.Holder, c.Attempt, store.ErrFenced)
	}
	t.wake(q + "/" + to)
	return nil
}

func (t *tx) Remove(q, state, id string) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	if _, err := t.exec("DELETE FROM docs WHERE queue=$1 AND id=$2 AND state=$3", q, id, state); err != nil {
		return fmt.Errorf("remove %s %s: %w", q, id, err)
	}
	return nil
}

func (t *tx) Reject(q, state, id, reason string) error {
	if err := store.Check(q, state, id); err != nil {
		return err
	}
	n, err := t.exec("UPDATE docs SET state='rejected', reason=$4, updated_at=now() WHERE queue=$1 AND id=$2 AND state=$3", q, id, state, reason)
	if err != nil {
		return fmt.Errorf("reject %s %s: %w", q, id, err)
	}
	if n == 0 {
		return fmt.Errorf("reject %s %s: %w in %s", q, id, store.ErrNotFound, state)
	}
	t.wake(q + "/rejected")
	return nil
}

func (t *tx) Emit(typ, actor string, data any) error {
	raw, err := store.EncodeData(data)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	if _, err := t.exec("INSERT INTO event_log (type, actor, data) VALUES ($1, $2, $3)", typ, actor, string(raw)); err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	return nil
}

func (t *tx) Value(ns, key string) ([]byte, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return nil, err
	}
	var v []byte
	// FOR UPDATE: a read-modify-write (a sequence) holds the row to commit.
	err := t.tx.QueryRow(t.ctx, "SELECT value FROM kv WHERE ns=$1 AND key=$2 FOR UPDATE", ns, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("value %s/%s: %w", ns, key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("value %s/%s: %w", ns, key, err)
	}
	return v, nil
}

// ValueForUpdate takes a transaction advisory lock on the key (held to
// the commit or rollback, present row or not) and then reads it: two
// read-modify-writes of a key that does not exist yet wait for each other
// too, which a row lock alone cannot do.
func (t *tx) ValueForUpdate(ns, key string) ([]byte, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return nil, err
	}
	if _, err := t.tx.Exec(t.ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", lockKey, ns+"/"+key); err != nil {
		return nil, fmt.Errorf("lock %s/%s: %w", ns, key, err)
	}
	return t.Value(ns, key)
}

func (t *tx) Set(ns, key string, value []byte) error {
	if err := store.CheckKey(ns, key); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO kv (ns, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (ns, key) DO UPDATE SET value=EXCLUDED.value, updated_at=now()`, ns, key, value)
	if err != nil {
		return fmt.Errorf("set %s/%s: %w", ns, key, err)
	}
	t.wake("kv/" + ns)
	return nil
}

func (t *tx) Delete(ns, key string) error {
	if err := store.CheckKey(ns, key); err != nil {
		return err
	}
	if _, err := t.exec("DELETE FROM kv WHERE ns=$1 AND key=$2", ns, key); err != nil {
		return fmt.Errorf("delete %s/%s: %w", ns, key, err)
	}
	t.wake("kv/" + ns)
	return nil
}

func (t *tx) Fence(l store.Lease) {
	pl, ok := l.(*lease)
	if !ok {
		t.err = fmt.Errorf("fence: lease %s is not a postgres lease: %w", l.Name(), store.ErrFenced)
		return
	}
	t.leases = append(t.leases, pl)
}

// Events returns up to max rows after cur under the transaction-horizon
// rule (package doc). A cursor is "<xid>:<id>".
func (s *Store) Events(ctx context.Context, cur store.Cursor, max int) ([]store.Event, error) {
	if max <= 0 {
		return nil, nil
	}
	xid, id := "0", int64(0)
	if cur != "" {
		x, i, ok := strings.Cut(string(cur), ":")
		n, err := strconv.ParseInt(i, 10, 64)
		if _, xerr := strconv.ParseUint(x, 10, 64); !ok || err != nil || xerr != nil {
			return nil, fmt.Errorf("event cursor %q: want <xid>:<id>", cur)
		}
		xid, id = x, n
	}
	// ORDER BY names the table's columns: a bare "xid" would be the
	// output column xid::text, which sorts "1000" before "999" (the cursor
	// then moves backwards and rows come again, or are skipped).
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.xid::text AS xid_text, e.ts, e.type, e.actor, e.data::text FROM event_log e
		WHERE e.xid < pg_snapshot_xmin(pg_current_snapshot()) AND (e.xid, e.id) > ($1::xid8, $2::bigint)
		ORDER BY e.xid, e.id LIMIT $3`, xid, id, max)
	if err != nil {
		return nil, fmt.Errorf("read event log: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var (
			rid  int64
			rxid string
			ts   time.Time
			ev   store.Event
			data string
		)
		if err := rows.Scan(&rid, &rxid, &ts, &ev.Type, &ev.Actor, &data); err != nil {
			return nil, fmt.Errorf("read event log: %w", err)
		}
		ev.TS = ts.UTC().Format(time.RFC3339Nano)
		ev.Data = []byte(data)
		ev.Cursor = store.Cursor(rxid + ":" + strconv.FormatInt(rid, 10))
		out = append(out, ev)
	}
	return out, rows.Err()
}
