package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// TrimEvents is the daily split of logs/events.log (SPEC §9.11): the live
// file is renamed to events-YYYYMMDD.log, the local day before now
// (events-YYYYMMDD-N.log when that name is taken), under the exclusive
// rotation lock so no writer is mid-line; a reader finishes the old file by
// its inode before it moves to the new one. The splits last written before
// now-keep are then removed. It returns how many splits went.
func (s *Store) TrimEvents(ctx context.Context, now time.Time, keep time.Duration) (int, error) {
	if s.ro {
		return 0, ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.splitEvents(now); err != nil {
		return 0, err
	}
	return s.removeSplits(now.Add(-keep))
}

func (s *Store) splitEvents(now time.Time) error {
	live := s.l.EventsLog()
	if fi, err := os.Stat(live); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil
	}
	day := now.In(time.Local).AddDate(0, 0, -1).Format("20060102")
	err := lockfile.With(s.l.RotateLock(), func() error {
		dst := s.l.EventsLogDay(day)
		for i := 2; ; i++ {
			if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
				break
			}
			dst = filepath.Join(s.l.LogsDir(), fmt.Sprintf("events-%s-%d.log", day, i))
		}
		return os.Rename(live, dst)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("split events.log: %w", err)
	}
	return nil
}

// removeSplits deletes the events-*.log splits last written before cutoff.
func (s *Store) removeSplits(cutoff time.Time) (int, error) {
	ents, err := os.ReadDir(s.l.LogsDir())
	if err != nil {
		return 0, fmt.Errorf("trim event log: %w", err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "events-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if os.Remove(filepath.Join(s.l.LogsDir(), name)) == nil {
			n++
		}
	}
	return n, nil
}
