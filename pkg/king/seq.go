package king

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// taskSeq is the task sequence (kv.NSSequences/kv.KeyTaskSeq; in file
// mode state/king/task-seq), "YYYYMMDD:N" with N the last number issued
// that day (SPEC §3.2). It resets daily and survives restarts. It is read
// at every use: it is the only record of the sequence.
type taskSeq struct {
	kv kv.KV
}

// parseSeq returns the day and number a sequence value records; a missing
// or damaged value is an empty sequence: a damaged sequence must not stop
// dispatch, so the day's count restarts and next skips ids already used.
func parseSeq(b []byte) (string, int) {
	day, num, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	n, err := strconv.Atoi(num)
	if !ok || len(day) != 8 || err != nil || n < 0 {
		return "", 0
	}
	return day, n
}

// next persists and returns the next n task ids for the day of now, in one
// atomic update (two kings never issue the same number). exists reports
// ids already used (a lost or damaged sequence). A crash after the update
// and before the tasks are written leaves at most n numbers unused.
func (s taskSeq) next(now time.Time, n int, exists func(string) bool) ([]string, error) {
	day := now.Format("20060102")
	var ids []string
	// Persist before use (SPEC §9.2): a crash after this never reissues an id.
	err := s.kv.Update(context.Background(), kv.NSSequences, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
		lastDay, last := parseSeq(old)
		if lastDay != day {
			last = 0
		}
		ids = ids[:0]
		for len(ids) < n {
			last++
			if id := fmt.Sprintf("task-%s-%03d", day, last); !exists(id) {
				ids = append(ids, id)
			}
		}
		return fmt.Appendf(nil, "%s:%d\n", day, last), nil
	})
	if err != nil {
		return nil, fmt.Errorf("next task id: %w", err)
	}
	return ids, nil
}
