package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Rows deletes the store's queue documents in end states past their
// retention (the rows the file rules above remove as files in PostgreSQL
// mode) and returns how many went. A store document carries no time of its
// last move, so its age counts from its created_at: a document is never
// removed before created_at + the state's days. Each deletion commits only
// while lease is current (nil: unfenced).
func Rows(ctx context.Context, st store.Store, lease store.Lease, ret config.Retention, now time.Time) (int, error) {
	rules := []struct {
		q, state string
		days     int
	}{
		{layout.QEvents, layout.Completed, ret.QueueDays},
		{layout.QTasks, layout.Completed, ret.QueueDays},
		{layout.QMessages, layout.Sent, ret.QueueDays},
		{layout.QMessages, layout.Failed, ret.FailedDays},
		{layout.QEvents, layout.Rejected, ret.RejectedDays},
		{layout.QTasks, layout.Rejected, ret.RejectedDays},
		{layout.QMessages, layout.Rejected, ret.RejectedDays},
	}
	total := 0
	var errs []error
	for _, ru := range rules {
		docs, err := st.List(ctx, ru.q, ru.state)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s/%s: %w", ru.q, ru.state, err))
			continue
		}
		cutoff := now.Add(-config.Days(ru.days))
		var old []string
		for _, d := range docs {
			// A zero created_at (unparsable) is not known to be old.
			if !d.CreatedAt.IsZero() && d.CreatedAt.Before(cutoff) {
				old = append(old, d.ID)
			}
		}
		if len(old) == 0 {
			continue
		}
		err = st.Update(ctx, func(tx store.Tx) error {
			if lease != nil {
				tx.Fence(lease)
			}
			for _, id := range old {
				// Gone or moved since the listing: someone else's now.
				if err := tx.Remove(ru.q, ru.state, id); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete old %s/%s: %w", ru.q, ru.state, err))
			continue
		}
		total += len(old)
	}
	return total, errors.Join(errs...)
}
