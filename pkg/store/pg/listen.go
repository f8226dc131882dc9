package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// channel is the NOTIFY channel every committed change is announced on.
const channel = "kingdom"

// Wildcard is the payload Listen sends when notifications may have been
// missed (its connection was just made or remade): a listener should look
// at everything.
const Wildcard = "*"

// listenBuffer is how many payloads Listen holds for a slow reader; more
// are dropped, which is harmless: a wake is level-triggered (the next
// tick rescans), and a reader that is behind has a wake pending anyway.
const listenBuffer = 64

// Changes returns the payloads of the changes every store handle on this
// database commits from now on (package doc: "<queue>/<state>",
// "kv/<ns>"), and Wildcard each time its connection (re)connects. It
// listens on a dedicated connection, never a pooled one (a pool would
// hand the LISTEN session to other work, or recycle it), made like a
// lease's (the DSN's keepalives), and named in pg_stat_activity by the
// process's application_name + "/listen". A lost connection is remade
// after 0.5 s, backing off to 2 s while the server stays unreachable. The
// channel is closed once ctx ends.
func (s *Store) Changes(ctx context.Context) <-chan string {
	out := make(chan string, listenBuffer)
	go s.listen(ctx, out)
	return out
}

func (s *Store) listen(ctx context.Context, out chan<- string) {
	defer close(out)
	// Reconnects stay close together (at most 2 s apart): the Wildcard a
	// new session sends is what wakes every role once the database is
	// back (SPEC §12.2: work resumes within 5 s of its return).
	const minWait, maxWait = 500 * time.Millisecond, 2 * time.Second
	wait := minWait
	for {
		c, err := s.listenConn(ctx)
		if err == nil {
			wait = minWait
			// Changes committed while no session listened (before the first
			// LISTEN, or since the last one died) were never announced.
			forward(out, Wildcard)
			for {
				var n *pgconn.Notification
				n, err = c.WaitForNotification(ctx)
				if n != nil {
					forward(out, n.Payload)
				}
				if err != nil {
					break
				}
			}
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			c.Close(closeCtx)
			cancel()
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		wait = min(2*wait, maxWait)
	}
}

// listenConn connects a dedicated session and LISTENs on channel.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.conn.Copy()
	cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + "/listen"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listen: connect: %w", err)
	}
	if _, err := c.Exec(ctx, "LISTEN "+channel); err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		c.Close(closeCtx)
		cancel()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return c, nil
}

func forward(out chan<- string, payload string) {
	select {
	case out <- payload:
	default:
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
