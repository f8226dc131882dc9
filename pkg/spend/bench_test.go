package spend

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkLedger_RecordOne: a day already holding n attempts records one
// more — through the journal (one appended line, one fdatasync) and, for
// comparison, the way it was done before the journal (the whole day
// rewritten and fsynced). The journal's cost must not grow with the day.
func BenchmarkLedger_RecordOne(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		seed := &Day{Date: "2026-11-21", Attempts: map[string]Entry{}}
		for i := range n {
			seed.Attempts[fmt.Sprintf("task-20261121-%04d#0#s", i)] = entry(fmt.Sprintf("task-20261121-%04d", i), 0.01)
		}
		b.Run(fmt.Sprintf("journal/%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "2026-11-21.json")
			if err := Save(path, seed); err != nil {
				b.Fatal(err)
			}
			j, err := Open(path, "2026-11-21")
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			i := 0
			for b.Loop() {
				k := fmt.Sprintf("task-x-%d#0#s", i)
				i++
				if _, err := j.Record([]string{k}, []Entry{entry("task-x", 0.01)}); err != nil {
					b.Fatal(err)
				}
				// As the king does after each result: today's spend
				// against the budget.
				if s := j.Summary(); s.Totals.Attempts != n+i {
					b.Fatalf("attempts %d, want %d", s.Totals.Attempts, n+i)
				}
			}
		})
		b.Run(fmt.Sprintf("rewrite/%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "2026-11-21.json")
			d := &Day{Date: seed.Date, Attempts: map[string]Entry{}}
			for k, e := range seed.Attempts {
				d.Attempts[k] = e
			}
			i := 0
			for b.Loop() {
				d.Put(fmt.Sprintf("task-x-%d#0#s", i), entry("task-x", 0.01))
				i++
				if err := Save(path, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
