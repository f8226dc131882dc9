package pg

import (
	"context"
	"fmt"
	"time"
)

// TrimEvents deletes the event log's rows written before now-keep. A
// reader's cursor is a place in (xid, id) order, so rows gone before it
// change nothing for it; a reader further behind than keep loses them, as
// a file cursor loses a split that retention removed.
func (s *Store) TrimEvents(ctx context.Context, now time.Time, keep time.Duration) (int, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM event_log WHERE ts < $1", now.Add(-keep))
	if err != nil {
		return 0, fmt.Errorf("trim event log: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
