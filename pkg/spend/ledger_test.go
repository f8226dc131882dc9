package spend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// storeKV is a key-value kept in a store (kv.OnStore): the files store
// here; pkg/king's PostgreSQL tests run it on PostgreSQL.
func storeKV(t testing.TB) kv.KV {
	t.Helper()
	st, err := files.Open(layout.New(t.TempDir()), "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return kv.OnStore(st)
}

const day = "2026-11-21"

// The store ledger records each attempt once (a repeat, within a call or
// after a crash, finds it), and a second handle, as a king on another
// host opens it, reads the same day.
func TestStoreLedger_RecordsOnceAndSharesTheDay(t *testing.T) {
	s := storeKV(t)
	days := StoreDays(s)
	a := days.Open(t.Context(), day)
	k1, k2 := Key("task-1", 0, "soldier-1-a"), Key("task-2", 1, "2026-11-21T10:00:00+02:00")
	n, err := a.Record([]string{k1, k2, k1}, []Entry{entry("task-1", 0.25), entry("task-2", 0.5), entry("task-1", 0.25)})
	if err != nil || n != 2 {
		t.Fatalf("record: %d, %v; want 2 new", n, err)
	}
	b := days.Open(t.Context(), day) // another king, after a failover
	if n, err := b.Record([]string{k2}, []Entry{entry("task-2", 0.5)}); err != nil || n != 0 {
		t.Fatalf("repeat: %d, %v; want nothing new", n, err)
	}
	s1 := b.Summary()
	if s1.Totals.CostUSD != 0.75 || s1.Totals.Attempts != 2 || s1.Totals.Damaged != 0 {
		t.Fatalf("totals %+v, want $0.75 over 2 attempts", s1.Totals)
	}
	if s1.Generals["gen-pr"].CostUSD != 0.75 || s1.Engines["claude"].Tokens != 30 {
		t.Errorf("per general/engine %+v %+v", s1.Generals, s1.Engines)
	}
	if tt := b.TaskTotals("task-2"); tt.CostUSD != 0.5 || tt.Attempts != 1 {
		t.Errorf("task-2 totals %+v", tt)
	}
	d, err := days.Load(t.Context(), day)
	if err != nil || !d.Has(k1) || !d.Has(k2) || len(d.Attempts) != 2 {
		t.Fatalf("load: %v %v", d.Attempts, err)
	}
	// Another day is another namespace.
	if other, err := days.Load(t.Context(), "2026-11-22"); err != nil || len(other.Attempts) != 0 {
		t.Errorf("next day: %v %v", other.Attempts, err)
	}
	// One entry per attempt, the journal line's JSON under the SHA-256 of
	// its key.
	vs, err := s.List(t.Context(), "spend-"+day)
	if err != nil || len(vs) != 2 {
		t.Fatalf("entries %d, %v", len(vs), err)
	}
	if v := string(vs[entryKey(k2)]); !strings.HasPrefix(v, `{"key":"task-2#1#2026-11-21T10:00:00+02:00","task_id":"task-2"`) {
		t.Errorf("entry of %s = %s", k2, v)
	}
}

// An entry that does not decode is skipped and counted as damage, like a
// damaged line; what decodes counts, and recording goes on.
func TestStoreLedger_DamagedEntrySkippedAndReported(t *testing.T) {
	s := storeKV(t)
	days := StoreDays(s)
	l := days.Open(t.Context(), day)
	if _, err := l.Record([]string{"task-1#0#s"}, []Entry{entry("task-1", 0.5)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "spend-"+day, "garbage", []byte(`{"key":"task-9#0#s","cost_u`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "spend-"+day, "keyless", []byte(`{"task_id":"task-8","cost_usd":3}`)); err != nil {
		t.Fatal(err)
	}
	d, err := days.Load(t.Context(), day)
	var dmg *DamageError
	if !errors.As(err, &dmg) || !errors.Is(err, ErrDamaged) || dmg.Records != 2 || !strings.Contains(dmg.Path, "spend-"+day) {
		t.Fatalf("load: %v, want 2 damaged records of spend-%s", err, day)
	}
	if d.Damaged != 2 || d.Summary().Totals.CostUSD != 0.5 || d.Summary().Totals.Damaged != 2 {
		t.Errorf("day damaged %d totals %+v", d.Damaged, d.Summary().Totals)
	}
	if n, err := l.Record([]string{"task-2#0#s"}, []Entry{entry("task-2", 0.25)}); err != nil || n != 1 {
		t.Fatalf("record past damage: %d, %v", n, err)
	}
	if tot := l.Summary().Totals; tot.CostUSD != 0.75 || tot.Damaged != 2 {
		t.Errorf("totals %+v, want $0.75 with 2 damaged", tot)
	}
	// An attempt whose entry was damaged is recorded over it.
	k := "task-3#0#s"
	if err := s.Put(t.Context(), "spend-"+day, entryKey(k), []byte("\x00\x00")); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Record([]string{k}, []Entry{entry("task-3", 1)}); err != nil || n != 1 {
		t.Fatalf("record over a damaged entry: %d, %v", n, err)
	}
	if tot := l.Summary().Totals; tot.CostUSD != 1.75 || tot.Damaged != 2 {
		t.Errorf("totals %+v, want $1.75 with 2 damaged", tot)
	}
}

// A store that cannot be read leaves the day unknown (Damaged), never an
// empty day, and refuses to record (a repeat could count twice).
func TestStoreLedger_UnreadableStoreIsUnknown(t *testing.T) {
	s := failing{errors.New("connection refused")}
	d, err := StoreDays(s).Load(t.Context(), day)
	if err == nil || errors.Is(err, ErrDamaged) || d.Damaged == 0 {
		t.Fatalf("load: %v damaged %d, want an error and an unknown day", err, d.Damaged)
	}
	l := StoreDays(s).Open(t.Context(), day)
	if tot := l.Summary().Totals; tot.Damaged == 0 {
		t.Errorf("summary %+v, want damaged", tot)
	}
	if _, err := l.Record([]string{"task-1#0#s"}, []Entry{entry("task-1", 1)}); err == nil {
		t.Error("recorded without reading the day")
	}
	if _, err := StoreDays(storeKV(t)).Load(t.Context(), "../x"); err == nil {
		t.Error("a bad date became a namespace")
	}
}

// One damaged entry among several costs that entry only (issue 31: a
// journal's torn last line used to lose the attempt recorded after it):
// the files store keeps a day as one file per attempt under
// state/king/spend/<date>/, a file cut short is counted as damaged, and
// the day's total still counts every other attempt, those recorded after
// the damage included.
func TestStoreLedger_OneDamagedEntryCostsOnlyThatEntry(t *testing.T) {
	l := layout.New(t.TempDir())
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	days := StoreDays(kv.OnStore(st))
	led := days.Open(t.Context(), day)
	keys := []string{"task-1#0#s", "task-2#0#s", "task-3#0#s"}
	if n, err := led.Record(keys, []Entry{entry("task-1", 0.1), entry("task-2", 0.1), entry("task-3", 0.1)}); err != nil || n != 3 {
		t.Fatalf("record: %d, %v", n, err)
	}
	dir := filepath.Join(l.SpendDir(), day)
	path := filepath.Join(dir, entryKey("task-2#0#s")+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the attempt's file: %v", err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil { // cut short
		t.Fatal(err)
	}
	if n, err := led.Record([]string{"task-4#0#s"}, []Entry{entry("task-4", 0.1)}); err != nil || n != 1 {
		t.Fatalf("record after the damage: %d, %v", n, err)
	}
	d, err := days.Load(t.Context(), day)
	var dmg *DamageError
	if !errors.As(err, &dmg) || dmg.Records != 1 || !strings.Contains(err.Error(), entryKey("task-2#0#s")) {
		t.Fatalf("load: %v, want one damaged entry named", err)
	}
	tot := d.Summary().Totals
	if tot.Attempts != 3 || tot.CostUSD != 0.3 || tot.Damaged != 1 || !d.Has("task-4#0#s") {
		t.Errorf("totals %+v, want the 3 other attempts ($0.30) and 1 damaged", tot)
	}
	if got := led.Summary().Totals; got != tot {
		t.Errorf("the king's summary %+v, want %+v", got, tot)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("%s holds %d files, want one per attempt (4)", dir, len(ents))
	}
}

type failing struct{ err error }

func (f failing) Get(context.Context, string, string) ([]byte, error)     { return nil, f.err }
func (f failing) Put(context.Context, string, string, []byte) error       { return f.err }
func (f failing) PutAll(context.Context, string, map[string][]byte) error { return f.err }
func (f failing) Delete(context.Context, string, string) error            { return f.err }
func (f failing) List(context.Context, string) (map[string][]byte, error) { return nil, f.err }
func (f failing) Update(context.Context, string, string, func([]byte) ([]byte, error)) error {
	return f.err
}
