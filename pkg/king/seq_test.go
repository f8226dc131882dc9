package king

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nextN reserves a block ahead: small batches of one day write the
// sequence file once per block, and a restart (which may have lost the
// numbers reserved but unused) never reissues an id.
func TestTaskSeq_NextNReservesABlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "task-seq")
	none := func(string) bool { return false }
	day := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := &taskSeq{path: path}
	got, err := s.nextN(day, 2, none)
	if err != nil {
		t.Fatal(err)
	}
	eqList(t, "first batch", got, "task-20261121-001", "task-20261121-002")
	b, _ := os.ReadFile(path)
	eq(t, "file after the first batch", strings.TrimSpace(string(b)), "20261121:66")
	st1, _ := os.Stat(path)

	got, _ = s.nextN(day, 3, none)
	eqList(t, "second batch", got, "task-20261121-003", "task-20261121-004", "task-20261121-005")
	st2, _ := os.Stat(path)
	if !os.SameFile(st1, st2) {
		t.Error("the sequence file was rewritten inside its reserved block")
	}

	s2 := &taskSeq{path: path}
	got, _ = s2.nextN(day, 1, none)
	eqList(t, "after a restart", got, "task-20261121-067")
	one, _ := s2.next(day, none)
	eq(t, "next after nextN", one, "task-20261121-068")

	// Past the block the file is written again.
	next := day.Add(24 * time.Hour)
	got, _ = s.nextN(next, 65, none)
	eq(t, "next day's last", got[64], "task-20261122-065")
	b, _ = os.ReadFile(path)
	eq(t, "file on the next day", strings.TrimSpace(string(b)), "20261122:129")
	got, _ = s.nextN(next, 64, none)
	eq(t, "inside the block", got[63], "task-20261122-129")
	got, _ = s.nextN(next, 1, none)
	eq(t, "past the block", got[0], "task-20261122-130")
	b, _ = os.ReadFile(path)
	eq(t, "file past the block", strings.TrimSpace(string(b)), "20261122:194")
}
