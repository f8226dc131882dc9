package spend

import (
	"fmt"
	"testing"
)

// BenchmarkLedger_RecordOne: a day already holding n attempts records one
// more and is summed, as the king does after each result (the files
// store: one file per attempt, the day read whole for the summary).
func BenchmarkLedger_RecordOne(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys := make([]string, n)
			entries := make([]Entry, n)
			for i := range n {
				keys[i] = fmt.Sprintf("task-20261121-%04d#0#s", i)
				entries[i] = entry(fmt.Sprintf("task-20261121-%04d", i), 0.01)
			}
			l := StoreDays(storeKV(b)).Open(b.Context(), day)
			if _, err := l.Record(keys, entries); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := l.Record([]string{fmt.Sprintf("task-x-%d#0#s", i)}, []Entry{entry("task-x", 0.01)}); err != nil {
					b.Fatal(err)
				}
				if s := l.Summary(); s.Totals.Attempts != n+i {
					b.Fatalf("attempts %d, want %d", s.Totals.Attempts, n+i)
				}
			}
		})
	}
}
