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
// issued that day (SPEC §3.2). It resets daily and survives restarts.
type taskSeq struct {
	path   string
	loaded bool
	day    string
	n      int // last number issued
	hi     int // number persisted in the file (≥ n): nextN reserves ahead
}

// seqBlock is how many numbers nextN reserves beyond a batch, so a burst
// of small batches writes the file once per block, not once per batch. A
// crash leaves at most this many numbers unused: gaps are harmless.
const seqBlock = 64

func (s *taskSeq) load() error {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read task-seq: %w", err)
	}
	day, num, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	n, err := strconv.Atoi(num)
	if !ok || len(day) != 8 || err != nil || n < 0 {
		// A damaged sequence must not stop dispatch: restart the day's
		// count; next() skips ids that already exist.
		day, n = "", 0
	}
	s.day, s.n, s.hi, s.loaded = day, n, n, true
	return nil
}

// next persists (fsync) and returns the next task id for the day of now.
// exists reports ids already used (a lost or damaged sequence file).
func (s *taskSeq) next(now time.Time, exists func(string) bool) (string, error) {
	if !s.loaded {
		if err := s.load(); err != nil {
			return "", err
		}
	}
	day := now.Format("20060102")
	n := s.n
	if s.day != day {
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
	s.day, s.n, s.hi = day, n, n
	return id, nil
}

// nextN reserves n task ids for the day of now with at most one persisted
// write (issue #15: a batch of dispatches pays one fsync'd sequence write,
// not one each; and the write reserves seqBlock more, so the next small
// batches of the day pay none). A crash leaves the reserved numbers unused:
// ids are never reissued, gaps are harmless.
func (s *taskSeq) nextN(now time.Time, n int, exists func(string) bool) ([]string, error) {
	if !s.loaded {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	day := now.Format("20060102")
	last := s.n
	if s.day != day {
		last = 0
	}
	out := make([]string, 0, n)
	for len(out) < n {
		last++
		id := fmt.Sprintf("task-%s-%03d", day, last)
		if !exists(id) {
			out = append(out, id)
		}
	}
	if n == 0 {
		return out, nil
	}
	// Persist before use (SPEC §9.2) unless the file already covers them.
	if s.day != day || last > s.hi {
		hi := last + seqBlock
		if err := atomicfile.WriteFile(s.path, []byte(fmt.Sprintf("%s:%d\n", day, hi)), 0o600); err != nil {
			return nil, fmt.Errorf("write task-seq: %w", err)
		}
		s.hi = hi
	}
	s.day, s.n = day, last
	return out, nil
}
