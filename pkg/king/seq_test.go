package king

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The sequence file is the only memory of issued ids: a new taskSeq over
// the same file (a restart) continues it, a new day restarts the count, a
// damaged file restarts it too, and ids already in use are skipped.
func TestTaskSeq_NextContinuesTheFile(t *testing.T) {
	l := layout.New(t.TempDir())
	path := l.KingTaskSeq()
	none := func(string) bool { return false }
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	next := func(s taskSeq, now time.Time, exists func(string) bool) string {
		t.Helper()
		id, err := nextOne(s, now, exists)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	eq(t, "first id", next(taskSeq{kv: kv.Files(l)}, day, none), "task-20261121-001")
	eq(t, "second id", next(taskSeq{kv: kv.Files(l)}, day, none), "task-20261121-002")
	b, _ := os.ReadFile(path)
	eq(t, "file", strings.TrimSpace(string(b)), "20261121:2")

	used := func(id string) bool { return id == "task-20261121-003" }
	eq(t, "skips an id in use", next(taskSeq{kv: kv.Files(l)}, day, used), "task-20261121-004")
	eq(t, "next day restarts", next(taskSeq{kv: kv.Files(l)}, day.Add(24*time.Hour), none), "task-20261122-001")

	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken := func(id string) bool { return id <= "task-20261122-001" }
	eq(t, "damaged file restarts past ids in use", next(taskSeq{kv: kv.Files(l)}, day.Add(24*time.Hour), taken), "task-20261122-002")
}

// Two kings over one task-seq (a second process, or a leader that has not
// stopped yet) never issue the same id: each next is one atomic update.
func TestTaskSeq_ConcurrentNextIssuesDistinctIDs(t *testing.T) {
	l := layout.New(t.TempDir())
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const each = 200
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	for range 2 {
		s := taskSeq{kv: kv.Files(l)}
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
	b, _ := os.ReadFile(l.KingTaskSeq())
	eq(t, "file", strings.TrimSpace(string(b)), "20261121:400")
}

// nextOne issues one id.
func nextOne(s taskSeq, now time.Time, exists func(string) bool) (string, error) {
	ids, err := s.next(now, 1, exists)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// A tick's dispatches take their ids in one update: consecutive, past ids
// in use, and the sequence records the last one.
func TestTaskSeq_NextIssuesATicksIDsInOneUpdate(t *testing.T) {
	l := layout.New(t.TempDir())
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := taskSeq{kv: kv.Files(l)}
	ids, err := s.next(day, 3, func(id string) bool { return id == "task-20261121-002" })
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "ids", strings.Join(ids, " "), "task-20261121-001 task-20261121-003 task-20261121-004")
	b, _ := os.ReadFile(l.KingTaskSeq())
	eq(t, "file", strings.TrimSpace(string(b)), "20261121:4")
	id, _ := nextOne(s, day, func(string) bool { return false })
	eq(t, "next", id, "task-20261121-005")
}
