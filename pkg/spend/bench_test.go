package spend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// BenchmarkLedger_RecordOne: a day already holding n attempts records one
// more and is summed, as the king does after each result: the ledger as
// it is (read the file, append one line, fdatasync, read it again for the
// summary) and, for comparison, the whole day rewritten atomically from
// memory (temp, fsync, rename, directory fsync; summary from memory).
func BenchmarkLedger_RecordOne(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		var seed bytes.Buffer
		for i := range n {
			l, _ := json.Marshal(journalLine{Key: fmt.Sprintf("task-20261121-%04d#0#s", i), Entry: entry(fmt.Sprintf("task-20261121-%04d", i), 0.01)})
			seed.Write(append(l, '\n'))
		}
		b.Run(fmt.Sprintf("append/%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "2026-11-21.json")
			if err := os.WriteFile(JournalPath(path), seed.Bytes(), 0o600); err != nil {
				b.Fatal(err)
			}
			j, _ := Open(path, "2026-11-21")
			i := 0
			for b.Loop() {
				k := fmt.Sprintf("task-x-%d#0#s", i)
				i++
				if _, err := j.Record([]string{k}, []Entry{entry("task-x", 0.01)}); err != nil {
					b.Fatal(err)
				}
				if s := j.Summary(); s.Totals.Attempts != n+i {
					b.Fatalf("attempts %d, want %d", s.Totals.Attempts, n+i)
				}
			}
		})
		b.Run(fmt.Sprintf("rewrite/%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "2026-11-21.jsonl")
			buf := bytes.NewBuffer(append([]byte(nil), seed.Bytes()...))
			d := &Day{}
			d.readJournalBytes(b, seed.Bytes())
			i := 0
			for b.Loop() {
				k := fmt.Sprintf("task-x-%d#0#s", i)
				i++
				d.Put(k, entry("task-x", 0.01))
				l, _ := json.Marshal(journalLine{Key: k, Entry: entry("task-x", 0.01)})
				buf.Write(append(l, '\n'))
				if err := atomicfile.WriteFile(path, buf.Bytes(), 0o600); err != nil {
					b.Fatal(err)
				}
				if s := d.Summary(); s.Totals.Attempts != n+i {
					b.Fatalf("attempts %d, want %d", s.Totals.Attempts, n+i)
				}
			}
		})
	}
}

func (d *Day) readJournalBytes(b *testing.B, data []byte) {
	for _, l := range bytes.Split(data, []byte("\n")) {
		if err := d.putLine(l); err != nil {
			b.Fatal(err)
		}
	}
}
