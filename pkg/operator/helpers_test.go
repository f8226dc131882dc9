package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/start"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fakeBins writes role "binaries" as tiny scripts that sleep.
func fakeBins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"sentinel", "king", "envoy", "chamberlain", "general", "soldier-spawn"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// newWatchdog is an installation whose roles (the fake binaries) the
// launcher runs on a private tmux server once its Round is called.
func newWatchdog(t *testing.T, binDir string, c *clock.Fake, manifests ...string) (*start.Watchdog, layout.Layout, *tmux.Client) {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sys := "watchdog:\n  interval_seconds: 1\n  stop_grace_seconds: 1\n  crash_loop:\n    max_restarts: 3\n    window_minutes: 10\n"
	os.WriteFile(l.ConfigFile("system.yaml"), []byte(sys), 0o600)
	for _, m := range manifests {
		os.WriteFile(l.GeneralManifest(m), []byte("name: "+m+"\ndescription: test general\nsubscribes: [\"test.*\"]\n"), 0o600)
	}
	tc := &tmux.Client{Socket: fmt.Sprintf("kingdom-operator-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { tc.KillServer(context.Background()) })
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "start", c)
	st := filesShared(t, l).Store
	w, err := start.New(start.Options{Layout: l, BinDir: binDir, Tmux: tc, Events: em, Clock: c,
		Store: st, Host: start.Host{ID: "test-host", Version: "test", Started: c.Now(),
			Open: func(context.Context) (store.Store, error) { return files.Open(l, "test-host") }}})
	if err != nil {
		t.Fatal(err)
	}
	return w, l, tc
}

func sessionNames(t *testing.T, tc *tmux.Client) map[string]tmux.Session {
	t.Helper()
	ss, err := tc.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]tmux.Session{}
	for _, s := range ss {
		m[s.Name] = s
	}
	return m
}
