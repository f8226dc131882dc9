package king

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// seqBlock is how many numbers next reserves beyond those it issues. SPEC
// §9.2's "persist before use" holds for every id (each is at or below the
// persisted mark before it is used), but a burst of dispatches writes and
// fsyncs the sequence once per block, not once per tick: the write sits
// between a freed slot and the next dispatch. A clean stop gives the unused
// rest back (release), so ids stay dense across restarts; a crash leaves at
// most seqBlock numbers unused.
const seqBlock = 32

// taskSeq is the task sequence (kv.NSSequences/kv.KeyTaskSeq; in file
// mode state/king/task-seq), "YYYYMMDD:N" with N the last number reserved
// that day (SPEC §3.2). It resets daily and survives restarts. The numbers
// of the block held are in memory (day, last, hi); the file is the only
// record across restarts.
type taskSeq struct {
	kv kv.KV

	mu   sync.Mutex
	day  string // the day of the block held ("" = none)
	last int    // the last number issued
	hi   int    // the last number reserved: what the record says
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

// take issues up to n ids of day after number from, below or at hi,
// skipping those exists reports used. It returns them and the last
// number it looked at.
func take(day string, from, hi, n int, exists func(string) bool) ([]string, int) {
	var ids []string
	last := from
	for len(ids) < n && last < hi {
		last++
		if id := fmt.Sprintf("task-%s-%03d", day, last); !exists(id) {
			ids = append(ids, id)
		}
	}
	return ids, last
}

// next returns the next n task ids for the day of now. exists reports ids
// already used (a lost or damaged sequence). Ids come from the block held
// when it has enough; otherwise one atomic update of the record reserves
// them and seqBlock more (two kings never reserve the same number: the
// other's reservations start past the record).
func (s *taskSeq) next(ctx context.Context, now time.Time, n int, exists func(string) bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	day := now.Format("20060102")
	if s.day == day {
		if ids, last := take(day, s.last, s.hi, n, exists); len(ids) == n {
			s.last = last
			return ids, nil
		}
	}
	var ids []string
	var last, hi int
	err := s.kv.Update(ctx, kv.NSSequences, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
		recDay, rec := parseSeq(old)
		if recDay != day {
			rec = 0
		}
		from := rec
		if s.day == day && rec == s.hi {
			from = s.last // the record is still ours: continue the block
		}
		ids, last = take(day, from, math.MaxInt, n, exists)
		hi = last + seqBlock
		return fmt.Appendf(nil, "%s:%d\n", day, hi), nil
	})
	if err != nil {
		return nil, fmt.Errorf("next task id: %w", err)
	}
	s.day, s.last, s.hi = day, last, hi
	return ids, nil
}

// errKeep leaves the record as it is (release).
var errKeep = errors.New("keep the task sequence")

// release gives the unused rest of the block back at a clean stop: the
// record goes back to the last number issued, unless another king has
// reserved past this one's block since.
func (s *taskSeq) release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.day == "" || s.last == s.hi {
		return nil
	}
	err := s.kv.Update(ctx, kv.NSSequences, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
		if day, rec := parseSeq(old); day != s.day || rec != s.hi {
			return nil, errKeep
		}
		return fmt.Appendf(nil, "%s:%d\n", s.day, s.last), nil
	})
	s.hi = s.last
	if errors.Is(err, errKeep) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release task ids: %w", err)
	}
	return nil
}
