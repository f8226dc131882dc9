package sentinel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
)

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// In the steady state admission neither creates nor frees an inode: the
// inbox files of one batch, once queued, move into the sentinel's spare
// pool, and after their rest they carry the event files of the next batch
// (a duplicate's file too). Every event is still queued whole, and the
// inbox is emptied.
func TestInbox_ConsumedFilesCarryTheNextEvents(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	// Published by rename, the way producers should: only a file whose
	// writer is known to be done with it is recycled.
	startNotifier(t, s)
	first := map[uint64]bool{}
	for i := range 3 {
		name := fmt.Sprintf("a%d.json", i)
		renameIn(t, e, name, fmt.Sprintf(`{"id":"evt-a-%d","type":"demo.hello","payload":{"text":"first batch, a longer payload than the next"}}`, i))
		first[inodeOf(t, filepath.Join(e.l.Inbox(), name))] = true
	}
	settle(t, s)
	e.tick(s)
	if got := len(e.pending()); got != 3 {
		t.Fatalf("pending after the first batch: %d", got)
	}
	st := s.SpareStats()
	if st.Created != 3 || st.Kept != 3 || st.Freed != 0 {
		t.Fatalf("first batch: %+v, want 3 created (an empty pool), 3 kept", st)
	}

	e.clk.Advance(queue.MinSpareAge)
	renameIn(t, e, "dup.json", `{"id":"evt-a-0","type":"demo.hello"}`)
	for i := range 2 {
		renameIn(t, e, fmt.Sprintf("b%d.json", i), fmt.Sprintf(`{"id":"evt-b-%d","type":"demo.hello","payload":{"n":%d}}`, i, i))
	}
	settle(t, s)
	e.tick(s)
	for _, id := range []string{"evt-b-0", "evt-b-1"} {
		ino := inodeOf(t, e.q.Path(layout.Pending, id))
		if !first[ino] {
			t.Errorf("%s was written into a new inode %d, not one of the first batch's inbox files", id, ino)
		}
		ev := e.event(id)
		if ev.Source != schema.SourceInbox || ev.Type != "demo.hello" {
			t.Errorf("%s = %+v", id, ev)
		}
	}
	if got := len(e.pending()); got != 5 {
		t.Errorf("pending %d, want 5", got)
	}
	if ents, _ := os.ReadDir(e.l.Inbox()); len(ents) != 1 || ents[0].Name() != "rejected" {
		t.Errorf("inbox not emptied: %v", ents)
	}
	st2 := s.SpareStats()
	if st2.Created != st.Created || st2.Freed != 0 {
		t.Errorf("second batch created %d and freed %d files, want none", st2.Created-st.Created, st2.Freed)
	}
	if st2.Reused != 2 || st2.Kept != 6 {
		t.Errorf("second batch: %+v, want 2 reused and 3 more kept (the duplicate's file too)", st2)
	}
	pool := 0
	ents, _ := os.ReadDir(e.l.SpareDir(layout.RoleSentinel))
	for _, de := range ents {
		if de.Type().IsRegular() {
			pool++
		}
	}
	if pool != 4 {
		t.Errorf("pool holds %d files, want 4 (1 left of the first batch, 3 of the second)", pool)
	}
}

// settle waits until the notifier has reported every rename so far: a
// first wake, then no further one for a quiet second (the renames are all
// in the kernel's queue before the first wake is awaited; a later read of
// that queue wakes again).
func settle(t *testing.T, s *sentinel.Sentinel) {
	t.Helper()
	waitWake(t, s, "the renames")
	for {
		select {
		case <-s.Wake():
		case <-time.After(time.Second): // quiet: the notifier has read every event
			return
		}
	}
}
