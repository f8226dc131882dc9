package files

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

func writeLines(t testing.TB, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		f.WriteString(l)
	}
	f.Close()
}

func ev(i int) string {
	return fmt.Sprintf(`{"ts":"2026-11-21T10:00:00Z","type":"t.%d","actor":"a","data":{}}`+"\n", i)
}

func collect(t testing.TB, c *logCursor) []string {
	t.Helper()
	var got []string
	if _, err := c.poll(func(e eventlog.Event) error { got = append(got, e.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// reopen is a restarted reader at c's position.
func reopen(c *logCursor) *logCursor {
	c.close()
	return &logCursor{path: c.path, pos: c.pos}
}

func TestLogCursor_ResumesAfterRestartWithoutRereading(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.log")
	writeLines(t, log, ev(1), ev(2), ev(3))
	c := &logCursor{path: log}
	if got := collect(t, c); len(got) != 3 {
		t.Fatalf("first poll %v", got)
	}
	writeLines(t, log, ev(4))
	c2 := reopen(c)
	defer c2.close()
	if got := collect(t, c2); len(got) != 1 || got[0] != "t.4" {
		t.Fatalf("after restart got %v, want [t.4]", got)
	}
}

func TestLogCursor_HoldsPartialLine(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.log")
	line := ev(2)
	writeLines(t, log, ev(1), line[:20])
	c := &logCursor{path: log}
	defer c.close()
	if got := collect(t, c); len(got) != 1 {
		t.Fatalf("got %v, want only the complete line", got)
	}
	writeLines(t, log, line[20:])
	if got := collect(t, c); len(got) != 1 || got[0] != "t.2" {
		t.Fatalf("after completion got %v", got)
	}
}

// Lines that straddle the cursor's 1 MiB reads, and one longer than a read,
// arrive whole and in order with their data intact.
func TestLogCursor_LinesAcrossAndBeyondOneReadArriveWhole(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.log")
	big := strings.Repeat("x", 3<<20)
	var lines []string
	for i := range 30000 { // ~2 MiB of ordinary lines: many straddle a read
		lines = append(lines, ev(i))
	}
	lines = append(lines, `{"ts":"2026-11-21T10:00:00Z","type":"t.big","actor":"a","data":{"blob":"`+big+`"}}`+"\n", ev(30001))
	writeLines(t, log, lines...)
	c := &logCursor{path: log}
	defer c.close()
	var got []string
	var blob int
	if _, err := c.poll(func(e eventlog.Event) error {
		got = append(got, e.Type)
		if e.Type == "t.big" {
			var d struct{ Blob string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			blob = len(d.Blob)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 30002 || blob != len(big) {
		t.Fatalf("got %d events (blob %d bytes); want 30002, %d", len(got), blob, len(big))
	}
	for i := range 30000 {
		if got[i] != fmt.Sprintf("t.%d", i) {
			t.Fatalf("event %d is %s", i, got[i])
		}
	}
	if got[30000] != "t.big" || got[30001] != "t.30001" {
		t.Fatalf("tail %v", got[30000:])
	}
}

func TestLogCursor_SkipsCorruptLineAlone(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.log")
	writeLines(t, log, ev(1), "{garbage\n", ev(2), `{"no":"type"}`+"\n", ev(3))
	c := &logCursor{path: log}
	defer c.close()
	if got := collect(t, c); fmt.Sprint(got) != "[t.1 t.2 t.3]" {
		t.Fatalf("got %v; want the 3 events around the 2 corrupt lines", got)
	}
}

func TestLogCursor_RotationMidConsumptionLosesNoLine(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "events.log")
	writeLines(t, log, ev(1), ev(2))
	c := &logCursor{path: log}
	got := collect(t, c)
	c.close() // a restart happens around the rotation too
	writeLines(t, log, ev(3), ev(4))
	if err := os.Rename(log, filepath.Join(dir, "events-20261120.log")); err != nil {
		t.Fatal(err)
	}
	writeLines(t, log, ev(5))
	c2 := reopen(c)
	defer c2.close()
	got = append(got, collect(t, c2)...)
	want := []string{"t.1", "t.2", "t.3", "t.4", "t.5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	writeLines(t, log, ev(6))
	if got := collect(t, c2); fmt.Sprint(got) != "[t.6]" {
		t.Fatalf("after switch got %v", got)
	}
}

// Two writers (each its own File, so its own lock descriptor, as two
// processes would have) append while the log is split under the rotate
// lock: the reader gets every line once, none torn.
func TestLogCursor_ConcurrentWritersWithRotation(t *testing.T) {
	dir := t.TempDir()
	log, lock := filepath.Join(dir, "events.log"), filepath.Join(dir, ".rotate.lock")
	const writers, n = 2, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := eventlog.NewFile(log, lock, nil)
			defer f.Close()
			for i := range n {
				if err := f.Append("test.event", fmt.Sprintf("w%d", w), map[string]any{"i": i}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	c := &logCursor{path: log}
	defer c.close()
	total, rotated := 0, false
	count := func() {
		n, err := c.poll(func(eventlog.Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	for {
		select {
		case <-finished:
			count()
			if !rotated {
				t.Log("writers finished before the rotation point")
			}
			if total != writers*n {
				t.Fatalf("consumed %d, want %d", total, writers*n)
			}
			return
		default:
		}
		count()
		if !rotated && total > 2000 {
			// Rotate the way the chamberlain does: exclusive lock, rename,
			// while the writers keep appending.
			err := lockfile.With(lock, func() error { return os.Rename(log, filepath.Join(dir, "events-20261120.log")) })
			if err != nil {
				t.Fatal(err)
			}
			rotated = true
		}
	}
}

func TestLogCursor_TruncatedFileStartsOver(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events.log")
	writeLines(t, log, ev(1), ev(2), ev(3))
	c := &logCursor{path: log}
	collect(t, c)
	// Truncated in place, then a new (shorter) line written.
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	writeLines(t, log, ev(4))
	c2 := reopen(c)
	defer c2.close()
	if got := collect(t, c2); fmt.Sprint(got) != "[t.4]" {
		t.Fatalf("after truncation got %v, want [t.4]", got)
	}
}

// BenchmarkLogCursor_1MLines consumes a 1,000,000-line events.log from
// offset 0.
func BenchmarkLogCursor_1MLines(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.log")
	f, _ := os.Create(path)
	w := bufio.NewWriter(f)
	for i := 0; i < 1_000_000; i++ {
		fmt.Fprintf(w, `{"ts":"2026-11-21T10:00:00Z","type":"task.completed","actor":"gen-pr","data":{"task_id":"task-20261121-%06d","status":"success","duration_seconds":12}}`+"\n", i)
	}
	w.Flush()
	f.Close()
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	for b.Loop() {
		c := &logCursor{path: path}
		n, err := c.poll(func(eventlog.Event) error { return nil })
		c.close()
		if err != nil || n != 1_000_000 {
			b.Fatal(n, err)
		}
	}
}
