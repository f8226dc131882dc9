package waits

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestWaits_WriteThenReadRoundTripsAndMissingIsEmpty(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	if r, err := Read(l); err != nil || len(r.Waits) != 0 {
		t.Fatalf("missing record: %+v, %v", r, err)
	}
	until := time.Date(2026, 11, 27, 8, 23, 0, 0, time.UTC)
	in := Record{UpdatedAt: until.Add(-time.Hour), Waits: []Wait{
		{EventID: "evt-1", Reason: TaskBudget, Detail: "today $9.50 + task $1.00 would pass $10.00", Since: until.Add(-2 * time.Hour)},
		{TaskID: "task-20261127-001", Reason: EnginePause, Detail: "codex usage limit", Since: until.Add(-time.Hour), Until: &until},
	}}
	if err := Write(l, in); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(Path(l))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record file: %v %v, want mode 0600", fi, err)
	}
	out, err := Read(l)
	if err != nil {
		t.Fatal(err)
	}
	by := out.ByID()
	if by["evt-1"].Reason != TaskBudget || by["task-20261127-001"].Until == nil || !by["task-20261127-001"].Until.Equal(until) {
		t.Errorf("round trip: %+v", out)
	}
	if err := os.WriteFile(Path(l), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(l); err == nil {
		t.Error("a torn record read without an error")
	}
}
