package start

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

func appendLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		f.WriteString(l + "\n")
	}
	f.Close()
}

func TestRelay_CopiesOtherRolesWarningsRateLimitedAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "system.log")
	appendLog(t, p, "[2026-11-21 11:59:00] [ERROR] [king] before start: not replayed")
	var out strings.Builder
	r := newRelay(p, &out, 2)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	appendLog(t, p,
		"[2026-11-21 12:00:00] [INFO] [king] tick",
		"[2026-11-21 12:00:00] [WARN] [start] start's own: already on stdout",
		"[2026-11-21 12:00:01] [ERROR] [king] load king.yaml: bad key",
		"[2026-11-21 12:00:02] [WARN] [gen-pr] clone failed",
		"[2026-11-21 12:00:03] [ERROR] [king] e2",
		"[2026-11-21 12:00:04] [ERROR] [king] e3",
		"[2026-11-21 12:00:05] [ERROR] [king] e4")
	// A half-written line waits for its end.
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o600)
	f.WriteString("[2026-11-21 12:00:06] [ALERT] [chamberlain] half")
	f.Close()
	r.step(now)
	got := out.String()
	for _, want := range []string{"bad key", "clone failed", "e2"} {
		if !strings.Contains(got, want) {
			t.Errorf("relayed %q, missing %q", got, want)
		}
	}
	for _, no := range []string{"not replayed", "tick", "start's own", "e3", "e4", "half"} {
		if strings.Contains(got, no) {
			t.Errorf("relayed %q, must not contain %q", got, no)
		}
	}
	// The chamberlain rotates: the end of the old file, then the new one.
	f, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o600)
	f.WriteString(" line\n")
	f.Close()
	os.Rename(p, p+".1")
	appendLog(t, p, "[2026-11-21 12:01:01] [WARN] [envoy] after rotation")
	out.Reset()
	r.step(now.Add(time.Minute))
	got = out.String()
	for _, want := range []string{"… 2 WARN/ERROR lines of king held back", "half line", "after rotation"} {
		if !strings.Contains(got, want) {
			t.Errorf("after a minute and a rotation relayed %q, missing %q", got, want)
		}
	}
}

func TestWatchdog_LogsARolesRecordedExit(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	bins := fakeBins(t)
	// king dies of a config error and records it, as app.Main does ($2 is
	// the --base-dir value).
	os.WriteFile(filepath.Join(bins, "king"), []byte("#!/bin/sh\n"+
		`printf '{"exit":2,"error":"config/king.yaml:4: retry.max_attempts: want a number","at":"2026-11-21T12:00:00Z"}' > "$2/state/king/last-exit"`+
		"\nexit 2\n"), 0o755)
	var journal strings.Builder
	w, l, tc := newWatchdog(t, bins, c)
	w.o.Journal = &journal
	// A record from an earlier run is not this launch's cause.
	os.WriteFile(l.LastExit("envoy"), []byte(`{"exit":1,"error":"stale","at":"2026-11-20T00:00:00Z"}`), 0o600)
	for round := 0; round < 6; round++ {
		w.Round(ctx)
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, ok := sessionNames(t, tc)["king"]; !ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // a real process exits
		}
		c.Advance(2 * time.Second)
		w.poll()
	}
	b, _ := os.ReadFile(l.EventsLog())
	if !strings.Contains(string(b), `"exit":2`) || !strings.Contains(string(b), "retry.max_attempts") {
		t.Fatalf("system.role_died lacks the recorded exit: %s", b)
	}
	if _, err := os.Stat(l.LastExit("envoy")); err == nil {
		t.Error("a stale last-exit survived the role's launch")
	}
	es, _ := queue.OnStore(w.o.Store, l, layout.QMessages, nil, "test-host").List(layout.Pending)
	if len(es) != 1 {
		t.Fatalf("%d alerts, want the crash-loop one", len(es))
	}
	m, _ := schema.DecodeMessage(es[0].Data)
	if !strings.Contains(m.Content, "exit 2: config/king.yaml:4") {
		t.Fatalf("crash-loop alert does not say why: %q", m.Content)
	}
}
