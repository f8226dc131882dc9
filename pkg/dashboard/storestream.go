package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// The streams and the metrics' counters read the store's event log
// through store.Events (logs/events.log on one machine, a table in
// PostgreSQL), and an SSE id is the store cursor just past its event, so
// Last-Event-ID resumes exactly (PostgreSQL's horizon rule delivers a late
// commit after, never instead of, the rows before it; the files store's
// cursor follows events.log into its daily split by inode).

// storeBatch is how many events one store read returns.
const storeBatch = 500

// readStore delivers every event after *cur to fn, moving *cur past each.
// fn's error stops it with *cur before that event.
func readStore(ctx context.Context, st store.Store, cur *store.Cursor, fn func(line []byte, after store.Cursor) error) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
		evs, err := st.Events(rctx, *cur, storeBatch)
		cancel()
		if err != nil {
			return err
		}
		for _, ev := range evs {
			// One JSON line, the shape of an events.log line.
			line, err := json.Marshal(eventlog.Event{TS: ev.TS, Type: ev.Type, Actor: ev.Actor, Data: ev.Data})
			if err != nil {
				return fmt.Errorf("encode event: %w", err)
			}
			if err := fn(line, ev.Cursor); err != nil {
				return err
			}
			*cur = ev.Cursor
		}
		if len(evs) < storeBatch {
			return nil
		}
	}
}

// storeTail is the cursor n events before the end of the store's log (n
// = 0: its end). The store reads forward only, so it walks the log once.
func storeTail(ctx context.Context, st store.Store, n int) (store.Cursor, error) {
	ring := make([]store.Cursor, n+1) // ring[i%len]: cursor before the i-th event
	var cur store.Cursor
	i := 0
	err := readStore(ctx, st, &cur, func(_ []byte, after store.Cursor) error {
		ring[i%len(ring)] = cur
		i++
		return nil
	})
	if err != nil {
		return "", err
	}
	if i <= n {
		return "", nil // fewer than n events: all of them
	}
	if n == 0 {
		return cur, nil
	}
	return ring[(i-n)%len(ring)], nil
}

// checkCursor refuses an SSE id that cannot be a store cursor before the
// store sees it.
func checkCursor(id string) (store.Cursor, error) {
	id = strings.TrimSpace(id)
	if len(id) > 200 || strings.ContainsAny(id, "\r\n") {
		return "", fmt.Errorf("event id %q is not a store cursor", id)
	}
	return store.Cursor(id), nil
}
