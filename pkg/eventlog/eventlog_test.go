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
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev eventlog.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" {
			t.Errorf("line %d is no valid event: %q", i+1, line)
		}
	}
}
