package chamberlain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/chamberlain/retention"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// tempSweepEvery is how often dead writers' dot-temps are swept.
const tempSweepEvery = 10 * time.Minute

// periodic runs size-based log rotation every tick, the temp sweep every
// ten minutes, and the daily jobs once per local day at or after their hour
// (a marker file per job, so a chamberlain that was down at that minute
// still runs them later that day). The report and row retention are
// cluster duties (cluster: this host leads them), and so is the event
// log's retention (store.TrimEvents at events_rotation.hour: the split of
// events.log on one machine).
func (r *Role) periodic(ctx context.Context, now time.Time, cluster bool) error {
	var errs []error
	errs = append(errs, r.rotateLogs())
	if r.lastTempSweep.IsZero() || now.Sub(r.lastTempSweep) >= tempSweepEvery || now.Before(r.lastTempSweep) {
		r.lastTempSweep = now
		// the dot-temps of dead writers (SPEC §9.31)
		if n := retention.SweepTemps(r.l, now); n > 0 {
			r.log.Info("removed stale temp files", "count", n, "cat", "CLEANUP")
		}
	}
	if cluster && r.due("events-rotation", r.c.EventsRotation.Hour, now, false) {
		errs = append(errs, r.trimEvents(ctx, now))
	}
	if r.due("cleanup", r.c.Cleanup.Hour, now, true) {
		errs = append(errs, r.cleanup(now))
	}
	if cluster && r.due("row-retention", r.c.Cleanup.Hour, now, true) {
		errs = append(errs, r.cleanRows(ctx, now))
	}
	if cluster && r.due("report", r.c.Report.Hour, now, false) {
		errs = append(errs, r.dailyReport(ctx, now))
	}
	return errors.Join(errs...)
}

// due reports whether a daily job should run now and, if so, records today
// in its marker first (a crash mid-job does not repeat it the same day).
// With runFirst false a missing marker only records today: a fresh install
// does not split or report a day it did not watch.
func (r *Role) due(job string, hour int, now time.Time, runFirst bool) bool {
	local := now.In(time.Local)
	today := local.Format("2006-01-02")
	path := dailyMarker(r.l, job)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !runFirst {
		mark := today // started after today's hour: first run tomorrow
		if local.Hour() < hour {
			mark = local.AddDate(0, 0, -1).Format("2006-01-02") // still runs today
		}
		r.writeMarker(path, mark)
		return false
	}
	if strings.TrimSpace(string(b)) == today || local.Hour() < hour {
		return false
	}
	return r.writeMarker(path, today)
}

func (r *Role) writeMarker(path, date string) bool {
	if err := atomicfile.WriteFile(path, []byte(date+"\n"), 0o600); err != nil {
		r.log.Error("write daily marker", "path", path, "err", err)
		return false
	}
	return true
}

// rotateLogs renames every logs/*.log over retention.log_max_mb to .old
// (events logs excepted: events.log is only split daily, SPEC §9.11).
func (r *Role) rotateLogs() error {
	ents, err := os.ReadDir(r.l.LogsDir())
	if err != nil {
		return fmt.Errorf("list logs: %w", err)
	}
	max := r.c.Retention.LogMaxBytes()
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".log") || strings.HasPrefix(name, "events") || strings.HasPrefix(name, ".") {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Size() <= max {
			continue
		}
		path := filepath.Join(r.l.LogsDir(), name)
		var size int64
		// Writers append holding the lock shared; nothing may log or emit
		// while we hold it exclusively.
		err = lockfile.With(r.l.RotateLock(), func() error {
			fi, err := os.Stat(path)
			if err != nil || fi.Size() <= max {
				return err
			}
			size = fi.Size()
			return os.Rename(path, path+".old")
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("rotate %s: %w", name, err))
			continue
		}
		if size > 0 {
			r.log.Info(fmt.Sprintf("rotated %s (%d MB → .old)", name, size>>20), "cat", "ROTATION")
			r.emit("recovery.log_rotated", map[string]any{"file": name, "size_mb": size >> 20})
		}
	}
	return errors.Join(errs...)
}

// cleanup runs the daily retention pass (seed 002, SPEC §9.31).
func (r *Role) cleanup(now time.Time) error {
	total, err := retention.New(r.l, r.tasks, r.c.Retention, r.log).Clean(now)
	if total > 0 {
		r.log.Info(fmt.Sprintf("deleted %d expired files", total), "cat", "CLEANUP")
		r.emit("recovery.files_cleaned", map[string]any{"deleted_count": total})
	}
	return err
}
