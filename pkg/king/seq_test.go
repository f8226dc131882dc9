package king

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The sequence file is the only memory of issued ids across restarts: a
// clean restart (release) continues it densely, a crash continues past the
// block the dead king held, a new day restarts the count, a damaged file
// restarts it too, and ids already in use are skipped.
func TestTaskSeq_NextContinuesTheFile(t *testing.T) {
	l := layout.New(t.TempDir())
	st := openStore(t, l)
	path := l.KingTaskSeq()
	none := func(string) bool { return false }
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	next := func(s *taskSeq, now time.Time, exists func(string) bool) string {
		t.Helper()
		id, err := nextOne(s, now, exists)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	file := func() string {
		b, _ := os.ReadFile(path)
		return strings.TrimSpace(string(b))
	}
	s := &taskSeq{kv: kv.OnStore(st)}
	eq(t, "first id", next(s, day, none), "task-20261121-001")
	eq(t, "file reserves a block", file(), fmt.Sprintf("20261121:%d", 1+seqBlock))
	eq(t, "second id", next(s, day, none), "task-20261121-002")
	eq(t, "from the block: file unchanged", file(), fmt.Sprintf("20261121:%d", 1+seqBlock))
	if err := s.release(t.Context()); err != nil {
		t.Fatal(err)
	}
	eq(t, "a clean stop gives the rest back", file(), "20261121:2")

	s = &taskSeq{kv: kv.OnStore(st)}
	used := func(id string) bool { return id == "task-20261121-003" }
	eq(t, "a restart continues, skipping an id in use", next(s, day, used), "task-20261121-004")
	// s dies without release: the next king starts past its block.
	s = &taskSeq{kv: kv.OnStore(st)}
	eq(t, "after a crash", next(s, day, none), fmt.Sprintf("task-20261121-%03d", 4+seqBlock+1))
	eq(t, "next day restarts", next(s, day.Add(24*time.Hour), none), "task-20261122-001")

	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken := func(id string) bool { return id <= "task-20261122-001" }
	s = &taskSeq{kv: kv.OnStore(st)}
	eq(t, "damaged file restarts past ids in use", next(s, day.Add(24*time.Hour), taken), "task-20261122-002")
}

// A king's release never takes back numbers another king reserved since
// (a leader that stops after the next one started).
func TestTaskSeq_ReleaseKeepsAnotherKingsReservation(t *testing.T) {
	l := layout.New(t.TempDir())
	st := openStore(t, l)
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	none := func(string) bool { return false }
	a, b := &taskSeq{kv: kv.OnStore(st)}, &taskSeq{kv: kv.OnStore(st)}
	idA, _ := nextOne(a, day, none)
	idB, _ := nextOne(b, day, none)
	eq(t, "a", idA, "task-20261121-001")
	eq(t, "b starts past a's block", idB, fmt.Sprintf("task-20261121-%03d", 2+seqBlock))
	if err := a.release(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(l.KingTaskSeq())
	eq(t, "record kept", strings.TrimSpace(string(raw)), fmt.Sprintf("20261121:%d", 2+2*seqBlock))
	idA, _ = nextOne(a, day, none)
	eq(t, "a reserves past b", idA, fmt.Sprintf("task-20261121-%03d", 3+2*seqBlock))
}

// Two kings over one task-seq (a second process, or a leader that has not
// stopped yet) never issue the same id: each next is one atomic update.
func TestTaskSeq_ConcurrentNextIssuesDistinctIDs(t *testing.T) {
	l := layout.New(t.TempDir())
	st := openStore(t, l)
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const each = 200
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	for range 2 {
		s := &taskSeq{kv: kv.OnStore(st)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := nextOne(s, day, func(string) bool { return false })
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("%s issued twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 2*each {
		t.Fatalf("%d distinct ids, want %d", len(seen), 2*each)
	}
	// Each king holds up to a block it has not used.
	b, _ := os.ReadFile(l.KingTaskSeq())
	if _, n := parseSeq(b); n < 2*each || n > 2*each+2*seqBlock {
		t.Fatalf("file %q: want between %d and %d", b, 2*each, 2*each+2*seqBlock)
	}
}

// nextOne issues one id.
func nextOne(s *taskSeq, now time.Time, exists func(string) bool) (string, error) {
	ids, err := s.next(context.Background(), now, 1, exists)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// A tick's dispatches take their ids in one update: consecutive, past ids
// in use, and the sequence records the last one.
func TestTaskSeq_NextIssuesATicksIDsInOneUpdate(t *testing.T) {
	l := layout.New(t.TempDir())
	st := openStore(t, l)
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := &taskSeq{kv: kv.OnStore(st)}
	ids, err := s.next(t.Context(), day, 3, func(id string) bool { return id == "task-20261121-002" })
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "ids", strings.Join(ids, " "), "task-20261121-001 task-20261121-003 task-20261121-004")
	b, _ := os.ReadFile(l.KingTaskSeq())
	eq(t, "file", strings.TrimSpace(string(b)), fmt.Sprintf("20261121:%d", 4+seqBlock))
	id, _ := nextOne(s, day, func(string) bool { return false })
	eq(t, "next", id, "task-20261121-005")
}
