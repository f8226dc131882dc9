package chamberlain

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// dailyReport issues the report of the events consumed since the last one,
// queues it as a report message and starts the next accumulation.
func (r *Role) dailyReport(ctx context.Context, now time.Time) error {
	acc := &r.state.Report
	rep, spendErr, err := report.Issue(ctx, r.l, spend.StoreDays(r.kv), acc, now)
	if spendErr != nil {
		r.log.Warn("daily report without spend", "err", spendErr)
	}
	if err != nil {
		return err
	}
	var data map[string]any
	b, _ := json.Marshal(rep)
	_ = json.Unmarshal(b, &data)
	// The id's <unix> is the local midnight of the report's day, so a repeat
	// after a crash finds the same id and queues nothing twice.
	local := now.In(time.Local)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.Local)
	err = r.putMessage(ctx, doc.MessageReport, KindReport, local.Format("20060102"), doc.UrgencyNormal, report.Text(rep),
		map[string]any{"report": data}, midnight)
	if err != nil && !errors.Is(err, queue.ErrExists) {
		return err
	}
	*acc = report.Acc{}
	acc.Init(now)
	return nil
}
