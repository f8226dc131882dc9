package spend

import (
	"bytes"
	"encoding/json"
	"errors"
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

func open(t *testing.T, path string) *Journal {
	t.Helper()
	j, err := Open(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func record(t *testing.T, j *Journal, keys []string, entries ...Entry) int {
	t.Helper()
	n, err := j.Record(keys, entries)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func load(t *testing.T, path string) *Day {
	t.Helper()
	d, err := Load(path, "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Recording appends one line per new attempt (a key already recorded, or
// repeated in the batch, is not written again); the king's own figures
// and every reader's come from the same file.
func TestJournal_RecordAppendsOneLinePerAttemptAndReadersSeeIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend", "2026-11-21.json")
	j := open(t, path)
	if n := record(t, j, []string{"task-a#0#s1"}, entry("task-a", 0.25)); n != 1 {
		t.Fatalf("first record = %d, want 1", n)
	}
	n := record(t, j, []string{"task-b#0#s2", "task-a#0#s1", "task-b#0#s2"}, entry("task-b", 0.5), entry("task-a", 9), entry("task-b", 9))
	if n != 1 {
		t.Fatalf("new attempts = %d, want 1 (one recorded before, one repeated)", n)
	}
	record(t, j, []string{"task-b#1#s3"}, entry("task-b", 0.125))
	jb, err := os.ReadFile(JournalPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(jb), "\n"); got != 3 {
		t.Errorf("ledger lines = %d, want 3:\n%s", got, jb)
	}
	if m := mode(t, JournalPath(path)); m != 0o600 {
		t.Errorf("ledger mode %v, want 0600", m)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a snapshot was written beside the ledger: %v", err)
	}
	s := load(t, path).Summary()
	if s.Totals.Attempts != 3 || s.Totals.CostUSD != 0.875 || s.Totals.Damaged != 0 {
		t.Errorf("loaded totals %+v, want 3 attempts, $0.875, none damaged", s.Totals)
	}
	if got := j.Summary().Totals; got != s.Totals {
		t.Errorf("journal's summary %+v, Load's %+v", got, s.Totals)
	}
	if tt := j.TaskTotals("task-b"); tt.Attempts != 2 || tt.CostUSD != 0.625 {
		t.Errorf("task-b totals %+v", tt)
	}
}

// A crash in mid-append leaves a torn last line: it is no record and no
// damage (its result was not marked processed), and the next record cuts
// it, so its attempt, recorded again, counts once and whole.
func TestJournal_TornLastLineIgnoredThenCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	j := open(t, path)
	record(t, j, []string{"task-a#0#s1", "task-b#0#s2"}, entry("task-a", 0.25), entry("task-b", 0.5))
	appendRaw(t, JournalPath(path), `{"key":"task-c#0#s3","task_id":"task-c","cost_us`)

	d := load(t, path)
	if s := d.Summary().Totals; s.Attempts != 2 || s.Damaged != 0 {
		t.Fatalf("with a torn last line: %+v, want 2 attempts, none damaged", s)
	}
	record(t, j, []string{"task-c#0#s3"}, entry("task-c", 0.125))
	if s := load(t, path).Summary().Totals; s.Attempts != 3 || s.CostUSD != 0.875 || s.Damaged != 0 {
		t.Errorf("after the next record: %+v, want 3 attempts, $0.875, none damaged", s)
	}
	if b, _ := os.ReadFile(JournalPath(path)); strings.Contains(string(b), "cost_us`") || strings.Count(string(b), "task-c#0#s3") != 1 {
		t.Errorf("the torn line survived or the attempt is there twice:\n%s", b)
	}
}

// A ledger cut short while the king runs (by hand, a full disk's repair, a
// restore) gets its next record right after what is left: no run of NUL
// bytes, no record lost behind one.
func TestJournal_CutShortWhileRunningNextRecordLandsWhole(t *testing.T) {
	for _, cut := range []string{"to nothing", "mid-line"} {
		t.Run(cut, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "2026-11-21.json")
			j := open(t, path)
			defer j.Close()
			record(t, j, []string{"task-a#0#s1"}, entry("task-a", 0.25))
			record(t, j, []string{"task-b#0#s2"}, entry("task-b", 0.5))
			size := int64(0)
			if cut == "mid-line" {
				b, _ := os.ReadFile(JournalPath(path))
				size = int64(bytes.IndexByte(b, '\n') + 10)
			}
			if err := os.Truncate(JournalPath(path), size); err != nil {
				t.Fatal(err)
			}
			record(t, j, []string{"task-c#0#s3"}, entry("task-c", 0.125))
			b, _ := os.ReadFile(JournalPath(path))
			if bytes.IndexByte(b, 0) >= 0 {
				t.Fatalf("NUL bytes in the ledger at %d of %d bytes", bytes.IndexByte(b, 0), len(b))
			}
			d, err := Load(path, "2026-11-21")
			if err != nil {
				t.Fatalf("load: %v\n%q", err, b)
			}
			if !d.Has("task-c#0#s3") {
				t.Errorf("the record after the cut is lost:\n%q", b)
			}
		})
	}
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func line(t *testing.T, key string, e Entry) string {
	t.Helper()
	b, err := json.Marshal(journalLine{Key: key, Entry: e})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// Damaged lines are skipped and reported, what parses counts: a line of
// garbage, a record behind NUL bytes (kept, the bytes before it are lost),
// and the day says how many records it could not read.
func TestLoad_DamagedLinesSkippedCountedAndReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	appendRaw(t, JournalPath(path), line(t, "task-a#0#s1", entry("task-a", 0.25))+
		"{\"key\":\"task-x#0#s9\",\"task_id\":\"ta\x07 garbage\n"+
		strings.Repeat("\x00", 300)+line(t, "task-b#0#s2", entry("task-b", 0.5))+
		line(t, "task-c#0#s3", entry("task-c", 1)))

	d, err := Load(path, "2026-11-21")
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) || de.Records != 2 {
		t.Fatalf("load error %v, want a *DamageError of 2 records", err)
	}
	if !strings.Contains(err.Error(), "line 2") {
		t.Errorf("the error does not say where: %v", err)
	}
	s := d.Summary().Totals
	if s.Attempts != 3 || s.CostUSD != 1.75 || s.Damaged != 2 {
		t.Errorf("totals %+v, want 3 attempts, $1.75, 2 damaged", s)
	}
	// The king's view is the same, and it still records.
	j := open(t, path)
	if got := j.Summary().Totals; got != s {
		t.Errorf("journal summary %+v, want %+v", got, s)
	}
	if n := record(t, j, []string{"task-d#0#s4", "task-b#0#s2"}, entry("task-d", 0.25), entry("task-b", 9)); n != 1 {
		t.Errorf("recorded %d into a damaged ledger, want 1", n)
	}
	if s := j.Summary().Totals; s.Attempts != 4 || s.CostUSD != 2 || s.Damaged != 2 {
		t.Errorf("after recording: %+v, want 4 attempts, $2, still 2 damaged", s)
	}
}

// A <date>.json snapshot of an earlier version is still read; a torn one
// keeps the attempts before the damage and reports it (it used to be
// refused, moved aside by the king, and the day counted from zero).
func TestLoad_SnapshotOfAnEarlierVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	snap := `{
  "date": "2026-11-21",
  "attempts": {
    "task-a#0#s1": {"task_id": "task-a", "general": "gen-pr", "engine": "claude", "cost_usd": 0.25, "usage": {"input_tokens": 10}},
    "task-b#0#s2": {"task_id": "task-b", "general": "gen-pr", "engine": "claude", "cost_usd": 0.5, "usage": {}}
  }
}
`
	if err := os.WriteFile(path, []byte(snap), 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, path)
	record(t, j, []string{"task-b#0#s2", "task-c#0#s3"}, entry("task-b", 9), entry("task-c", 1))
	if s := load(t, path).Summary().Totals; s.Attempts != 3 || s.CostUSD != 1.75 || s.Damaged != 0 {
		t.Fatalf("snapshot + ledger: %+v, want 3 attempts, $1.75 (the snapshot's task-b once)", s)
	}

	torn := snap[:strings.Index(snap, `"task-b#0#s2"`)+30]
	if err := os.WriteFile(path, []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Load(path, "2026-11-21")
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("a torn snapshot: error %v, want ErrDamaged", err)
	}
	if s := d.Summary().Totals; s.Attempts != 2 || s.CostUSD != 1.25 || s.Damaged != 1 {
		t.Errorf("a torn snapshot: %+v, want task-a from it and task-c from the ledger ($1.25), 1 damaged", s)
	}
}

// A ledger that cannot be read at all leaves the day's figure unknown:
// Summary marks it damaged (so admission holds) and Record refuses, since
// without the recorded keys a repeat would count twice.
func TestJournal_UnreadableLedgerHoldsAndRefusesToRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-11-21.json")
	if err := os.MkdirAll(JournalPath(path), 0o700); err != nil { // reading a directory fails
		t.Fatal(err)
	}
	j := open(t, path)
	if s := j.Summary().Totals; s.Damaged == 0 {
		t.Errorf("unreadable ledger's totals %+v, want damaged", s)
	}
	if _, err := Load(path, "2026-11-21"); err == nil {
		t.Error("Load of an unreadable ledger: no error")
	}
	if _, err := j.Record([]string{"task-a#0#s1"}, []Entry{entry("task-a", 1)}); err == nil {
		t.Error("Record into an unreadable ledger: no error")
	}
	st := Evaluate("2026-11-21", j.Summary().Totals, Budget{DailyUSD: f(10)})
	if ok, why := Admit(st, nil, "high"); ok || !strings.Contains(why, "damaged") {
		t.Errorf("admit with an unreadable ledger = %v (%q), want held", ok, why)
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
