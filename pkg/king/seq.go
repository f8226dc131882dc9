package king

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// taskSeq is state/king/task-seq, "YYYYMMDD:N" with N the last number
// issued that day (SPEC §3.2). It resets daily and survives restarts. The
// file is read at every use: it is the only record of the sequence.
type taskSeq struct {
	path string
}

// last returns the day and number the file records; a missing file is
// an empty sequence.
func (s taskSeq) last() (string, int, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read task-seq: %w", err)
	}
	day, num, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	n, err := strconv.Atoi(num)
	if !ok || len(day) != 8 || err != nil || n < 0 {
		// A damaged sequence must not stop dispatch: restart the day's
		// count; next skips ids that already exist.
		return "", 0, nil
	}
	return day, n, nil
}

// next persists (fsync) and returns the next task id for the day of now.
// exists reports ids already used (a lost or damaged sequence file).
func (s taskSeq) next(now time.Time, exists func(string) bool) (string, error) {
	lastDay, n, err := s.last()
	if err != nil {
		return "", err
	}
	day := now.Format("20060102")
	if lastDay != day {
		n = 0
	}
	var id string
	for {
		n++
		id = fmt.Sprintf("task-%s-%03d", day, n)
		if !exists(id) {
			break
		}
	}
	// Persist before use (SPEC §9.2): a crash after this never reissues id.
	if err := atomicfile.WriteFile(s.path, []byte(fmt.Sprintf("%s:%d\n", day, n)), 0o600); err != nil {
		return "", fmt.Errorf("write task-seq: %w", err)
	}
	return id, nil
}
