package eventlog_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
)

func TestMain(m *testing.M) {
	if os.Getenv("KINGDOM_EMIT_HELPER") != "" {
		n, _ := strconv.Atoi(os.Getenv("KINGDOM_EMIT_N"))
		dir := os.Getenv("KINGDOM_EMIT_DIR")
		em := eventlog.NewEmitter(filepath.Join(dir, "events.log"), filepath.Join(dir, ".rotate.lock"), os.Getenv("KINGDOM_EMIT_HELPER"), nil)
		for i := 0; i < n; i++ {
			if err := em.Emit("test.event", map[string]any{"i": i, "pad": "0123456789abcdefghijklmnopqrstuvwxyz"}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
	os.Exit(pgtest.Main(m))
}

func spawnEmitters(t testing.TB, dir string, procs, n int) []*exec.Cmd {
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), fmt.Sprintf("KINGDOM_EMIT_HELPER=proc%d", p), fmt.Sprintf("KINGDOM_EMIT_N=%d", n), "KINGDOM_EMIT_DIR="+dir)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

func TestEmit_ConcurrentProcessesNeverInterleave(t *testing.T) {
	dir := t.TempDir()
	const procs, n = 8, 10000
	for _, c := range spawnEmitters(t, dir, procs, n) {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	per := map[string]int{}
	for sc.Scan() {
		var ev eventlog.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type != "test.event" {
			t.Fatalf("line %d not a valid event: %q", lines+1, sc.Text())
		}
		per[ev.Actor]++
		lines++
	}
	if lines != procs*n {
		t.Fatalf("got %d lines, want %d", lines, procs*n)
	}
	for a, c := range per {
		if c != n {
			t.Errorf("%s wrote %d lines, want %d", a, c, n)
		}
	}
	st, _ := os.Stat(filepath.Join(dir, "events.log"))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("events.log mode %v, want 0600", st.Mode().Perm())
	}
}

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

func collect(t testing.TB, c *eventlog.Cursor) []string {
	t.Helper()
	var got []string
	if _, err := c.Poll(func(e eventlog.Event) error { got = append(got, e.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCursor_ResumesAfterRestartWithoutRereading(t *testing.T) {
	dir := t.TempDir()
	log, state := filepath.Join(dir, "events.log"), filepath.Join(dir, "cursor.json")
	writeLines(t, log, ev(1), ev(2), ev(3))
	c, _ := eventlog.OpenCursor(log, state)
	if got := collect(t, c); len(got) != 3 {
		t.Fatalf("first poll %v", got)
	}
	c.Save()
	c.Close()
	writeLines(t, log, ev(4))
	c2, _ := eventlog.OpenCursor(log, state)
	defer c2.Close()
	got := collect(t, c2)
	if len(got) != 1 || got[0] != "t.4" {
		t.Fatalf("after restart got %v, want [t.4]", got)
	}
}

func TestCursor_HoldsPartialLine(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "events.log")
	line := ev(2)
	writeLines(t, log, ev(1), line[:20])
	c, _ := eventlog.OpenCursor(log, "")
	defer c.Close()
	if got := collect(t, c); len(got) != 1 {
		t.Fatalf("got %v, want only the complete line", got)
	}
	writeLines(t, log, line[20:])
	if got := collect(t, c); len(got) != 1 || got[0] != "t.2" {
		t.Fatalf("after completion got %v", got)
	}
	if c.Corrupt != 0 {
		t.Fatalf("partial line counted as corrupt")
	}
}

// Lines that straddle the cursor's 1 MiB reads, and one longer than a read,
// arrive whole and in order with their data intact.
func TestCursor_LinesAcrossAndBeyondOneReadArriveWhole(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "events.log")
	big := strings.Repeat("x", 3<<20)
	var lines []string
	for i := range 30000 { // ~2 MiB of ordinary lines: many straddle a read
		lines = append(lines, ev(i))
	}
	lines = append(lines, `{"ts":"2026-11-21T10:00:00Z","type":"t.big","actor":"a","data":{"blob":"`+big+`"}}`+"\n", ev(30001))
	writeLines(t, log, lines...)
	c, _ := eventlog.OpenCursor(log, "")
	defer c.Close()
	var got []string
	var blob int
	if _, err := c.Poll(func(e eventlog.Event) error {
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
	if len(got) != 30002 || c.Corrupt != 0 || blob != len(big) {
		t.Fatalf("got %d events (corrupt %d, blob %d bytes); want 30002, 0, %d", len(got), c.Corrupt, blob, len(big))
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

func TestCursor_SkipsCorruptLineAlone(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "events.log")
	writeLines(t, log, ev(1), "{garbage\n", ev(2), `{"no":"type"}`+"\n", ev(3))
	c, _ := eventlog.OpenCursor(log, "")
	defer c.Close()
	got := collect(t, c)
	if len(got) != 3 || c.Corrupt != 2 {
		t.Fatalf("got %v corrupt=%d; want 3 events, 2 corrupt", got, c.Corrupt)
	}
}

func TestCursor_RotationMidConsumptionLosesNoLine(t *testing.T) {
	dir := t.TempDir()
	log, state := filepath.Join(dir, "events.log"), filepath.Join(dir, "cursor.json")
	writeLines(t, log, ev(1), ev(2))
	c, _ := eventlog.OpenCursor(log, state)
	got := collect(t, c)
	c.Save()
	c.Close() // a restart happens around the rotation too
	writeLines(t, log, ev(3), ev(4))
	if err := os.Rename(log, filepath.Join(dir, "events-20261120.log")); err != nil {
		t.Fatal(err)
	}
	writeLines(t, log, ev(5))
	c2, _ := eventlog.OpenCursor(log, state)
	defer c2.Close()
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

func TestCursor_ConcurrentWritersWithRotation(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "events.log")
	cmds := spawnEmitters(t, dir, 2, 5000)
	finished := make(chan struct{})
	go func() {
		for _, cmd := range cmds {
			cmd.Wait()
		}
		close(finished)
	}()
	c, _ := eventlog.OpenCursor(log, "")
	defer c.Close()
	total := 0
	rotated := false
	count := func() {
		n, err := c.Poll(func(eventlog.Event) error { return nil })
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
			if total != 10000 || c.Corrupt != 0 {
				t.Fatalf("consumed %d (corrupt %d), want 10000", total, c.Corrupt)
			}
			return
		default:
		}
		count()
		if !rotated && total > 2000 {
			// Rotate the way the chamberlain does: exclusive lock, rename,
			// while the writers keep appending.
			rotateUnderLock(t, dir)
			rotated = true
		}
	}
}

func TestCursor_TruncatedFileStartsOver(t *testing.T) {
	dir := t.TempDir()
	log, state := filepath.Join(dir, "events.log"), filepath.Join(dir, "cursor.json")
	writeLines(t, log, ev(1), ev(2), ev(3))
	c, _ := eventlog.OpenCursor(log, state)
	collect(t, c)
	c.Save()
	c.Close()
	// Truncated in place, then a new (shorter) line written.
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	writeLines(t, log, ev(4))
	c2, _ := eventlog.OpenCursor(log, state)
	defer c2.Close()
	if got := collect(t, c2); fmt.Sprint(got) != "[t.4]" || c2.Truncations != 1 {
		t.Fatalf("after truncation got %v (truncations %d), want [t.4]", got, c2.Truncations)
	}
}

func TestEmit_RedactsSecretsAndStaysValidJSON(t *testing.T) {
	dir := t.TempDir()
	em := eventlog.NewEmitter(filepath.Join(dir, "events.log"), filepath.Join(dir, ".rotate.lock"), "sentinel", nil)
	em.Emit("system.file_rejected", map[string]any{
		"reason": `upstream said {"access_token":"abc\"def","ok":false} with Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123`,
	})
	em.Emit("system.token_status_changed", map[string]any{"from": "ok", "to": "warning"})
	b, _ := os.ReadFile(filepath.Join(dir, "events.log"))
	for _, secret := range []string{"abc", "ghp_abcdefghijklmnopqrstuvwxyz0123"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("events.log leaks %q:\n%s", secret, b)
		}
	}
	c, _ := eventlog.OpenCursor(filepath.Join(dir, "events.log"), "")
	defer c.Close()
	if got := collect(t, c); len(got) != 2 || c.Corrupt != 0 {
		t.Fatalf("read back %v (corrupt %d), want 2 valid lines", got, c.Corrupt)
	}
}
