package spend

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func entry(task string, cost float64) Entry {
	return Entry{Task: task, General: "gen-pr", Engine: "claude", CostUSD: f(cost), Status: "success",
		Usage: Usage{InputTokens: 10, OutputTokens: 5}, At: "2026-11-21T10:00:00Z"}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// Recording appends to the journal (the snapshot is not rewritten per
// attempt); readers see snapshot and journal together, each key once.
func TestJournal_RecordAppendsAndLoadSeesSnapshotPlusJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spend")
	path := filepath.Join(dir, "2026-11-21.json")
	old := &Day{Date: "2026-11-21", Attempts: map[string]Entry{"task-a#0#s1": entry("task-a", 0.25)}}
	if err := Save(path, old); err != nil {
		t.Fatal(err)
	}
	j, err := Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	snap, _ := os.ReadFile(path)

	n, err := j.Record([]string{"task-b#0#s2", "task-a#0#s1", "task-b#0#s2"},
		[]Entry{entry("task-b", 0.5), entry("task-a", 9), entry("task-b", 9)})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("new attempts = %d, want 1 (one recorded before, one repeated)", n)
	}
	if n, _ := j.Record([]string{"task-b#1#s3"}, []Entry{entry("task-b", 0.125)}); n != 1 {
		t.Fatalf("second record = %d, want 1", n)
	}
	if now, _ := os.ReadFile(path); string(now) != string(snap) {
		t.Error("the snapshot was rewritten by a record")
	}
	jb, err := os.ReadFile(JournalPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(jb), "\n"); got != 2 {
		t.Errorf("journal lines = %d, want 2:\n%s", got, jb)
	}
	if m := mode(t, JournalPath(path)); m != 0o600 {
		t.Errorf("journal mode %v, want 0600", m)
	}

	d, err := Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	s := d.Summary()
	if s.Totals.Attempts != 3 || s.Totals.CostUSD != 0.875 {
		t.Errorf("loaded totals %+v, want 3 attempts, $0.875", s.Totals)
	}
	if got := j.Summary().Totals; got != s.Totals {
		t.Errorf("journal's own summary %+v, Load's %+v", got, s.Totals)
	}
	if tt := j.TaskTotals("task-b"); tt.Attempts != 2 || tt.CostUSD != 0.625 {
		t.Errorf("task-b totals %+v", tt)
	}
	if tt := d.TaskTotals("task-b"); tt != j.TaskTotals("task-b") {
		t.Errorf("Day.TaskTotals %+v, Journal.TaskTotals %+v", tt, j.TaskTotals("task-b"))
	}
}

// A crash in mid-append leaves a torn last line: readers ignore it, and
// the next Open folds the whole lines into the snapshot and drops it. A
// crash after the fold's snapshot but before the journal's removal counts
// nothing twice.
func TestJournal_TornLastLineAndInterruptedFold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spend")
	path := filepath.Join(dir, "2026-11-21.json")
	j, err := Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record([]string{"task-a#0#s1", "task-b#0#s2"}, []Entry{entry("task-a", 0.25), entry("task-b", 0.5)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	jf, err := os.OpenFile(JournalPath(path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	jf.WriteString(`{"key":"task-c#0#s3","task_id":"task-c","cost_us`)
	jf.Close()

	d, err := Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	if d.Summary().Totals.Attempts != 2 {
		t.Fatalf("attempts with a torn last line = %d, want 2", d.Summary().Totals.Attempts)
	}

	// An interrupted fold: the snapshot holds everything, the journal too.
	if err := Save(path, d); err != nil {
		t.Fatal(err)
	}
	if d, _ := Load(path, "2026-11-21"); d.Summary().Totals.CostUSD != 0.75 {
		t.Errorf("snapshot and journal both holding the attempts: $%v, want 0.75", d.Summary().Totals.CostUSD)
	}

	j, err = Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := os.Stat(JournalPath(path)); !os.IsNotExist(err) {
		t.Errorf("journal after Open folded it: %v", err)
	}
	if _, err := j.Record([]string{"task-c#0#s3"}, []Entry{entry("task-c", 0.125)}); err != nil {
		t.Fatal(err)
	}
	d, err = Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Summary().Totals; s.Attempts != 3 || s.CostUSD != 0.875 {
		t.Errorf("after the fold and a new record: %+v, want 3 attempts, $0.875", s)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("snapshot mode %v, want 0600", m)
	}
}

// A journal whose file got a partial write (a failed append) is cut back
// to its last whole line before the next append, so no line is glued to a
// fragment.
func TestJournal_AppendAfterAFailedWriteStartsOnAWholeLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend", "2026-11-21.json")
	j, err := Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Record([]string{"task-a#0#s1"}, []Entry{entry("task-a", 0.25)}); err != nil {
		t.Fatal(err)
	}
	j.f.WriteString(`{"key":"task-x#0#`) // what a failed write may leave
	j.reset()
	if _, err := j.Record([]string{"task-b#0#s2"}, []Entry{entry("task-b", 0.5)}); err != nil {
		t.Fatal(err)
	}
	d, err := Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Summary().Totals; s.Attempts != 2 || s.CostUSD != 0.75 {
		t.Errorf("totals %+v, want 2 attempts, $0.75", s)
	}
	b, _ := os.ReadFile(JournalPath(path))
	if strings.Contains(string(b), "task-x") {
		t.Errorf("the fragment survived:\n%s", b)
	}
}

// A corrupt snapshot is reported (the king moves it aside), not silently
// replaced.
func TestJournal_OpenCorruptSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	os.WriteFile(path, []byte("{not json"), 0o600)
	if _, err := Open(path, "2026-11-21"); err == nil || !strings.Contains(err.Error(), ErrCorrupt.Error()) {
		t.Fatalf("Open of a corrupt snapshot: %v", err)
	}
}

// A task's totals span the local days from its creation to now, each day
// asked once, at most maxDays back; Priced is null when nothing was priced.
func TestTaskTotals_DaysOfTheTaskOnceEachWithinTheBound(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.Local)
	var asked []string
	day := func(date string) Totals {
		asked = append(asked, date)
		return Totals{CostUSD: 0.5, Attempts: 1}
	}
	tot := TaskTotals(now.Add(-49*time.Hour), now, 8, day)
	if want := []string{"2026-11-22", "2026-11-23", "2026-11-24"}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	if p := tot.Priced(); p == nil || *p != 1.5 {
		t.Errorf("priced %v, want 1.5", p)
	}
	asked = nil
	TaskTotals(now.Add(-30*24*time.Hour), now, 3, day)
	if len(asked) != 3 || asked[2] != "2026-11-24" {
		t.Errorf("a month-old task asked %v, want the last 3 days", asked)
	}
	if (Totals{Attempts: 2, Unpriced: 2, Tokens: 9}).Priced() != nil || (Totals{}).Priced() != nil {
		t.Error("unpriced or empty totals have a price")
	}
}

// Once asked, the journal's summary follows each record (no re-sum of the
// day per attempt) and agrees with a fresh Load of the files: totals, and
// the per-general and per-engine maps.
func TestJournal_SummaryFollowsRecordsWithoutResumming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	j, err := Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if s := j.Summary(); s.Totals.Attempts != 0 {
		t.Fatalf("empty day summary %+v", s)
	}
	other := entry("task-c", 0.25)
	other.General, other.Engine = "gen-ops", "codex"
	if _, err := j.Record([]string{"task-a#0#s1", "task-c#0#s2"}, []Entry{entry("task-a", 0.5), other}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record([]string{"task-a#1#s3", "task-a#0#s1"}, []Entry{entry("task-a", 0.125), entry("task-a", 9)}); err != nil {
		t.Fatal(err)
	}
	got := j.Summary()
	if got.Totals.Attempts != 3 || got.Totals.CostUSD != 0.875 {
		t.Fatalf("summary after records %+v, want 3 attempts, $0.875", got.Totals)
	}
	d, err := Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	want := d.Summary()
	if got.Totals != want.Totals || got.Generals["gen-pr"] != want.Generals["gen-pr"] || got.Generals["gen-ops"] != want.Generals["gen-ops"] ||
		got.Engines["claude"] != want.Engines["claude"] || got.Engines["codex"] != want.Engines["codex"] || len(got.Generals) != 2 || len(got.Engines) != 2 {
		t.Errorf("followed summary %+v\nLoad's %+v", got, want)
	}
}
