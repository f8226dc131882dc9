package sentinel_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/sentinel"
)

// startNotifier runs the sentinel's inbox notifier until the test ends.
func startNotifier(t *testing.T, s *sentinel.Sentinel) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitWake waits for the sentinel's wake-up (the notifier saw a close or a
// rename).
func waitWake(t *testing.T, s *sentinel.Sentinel, what string) {
	t.Helper()
	select {
	case <-s.Wake():
	case <-time.After(60 * time.Second): // inotify answers in microseconds; the bound only avoids a hang
		t.Fatalf("no wake-up after %s", what)
	}
}

// renameIn publishes inbox/<name> the recommended way: dot-temp, rename.
func renameIn(t *testing.T, e *env, name, body string) {
	t.Helper()
	tmp := filepath.Join(e.l.Inbox(), ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.l.Inbox(), name)); err != nil {
		t.Fatal(err)
	}
}

// The fake clock stays at t0, days before the files' real mtimes, so the
// age rule alone would never let these files through: only the notifier's
// close/rename knowledge can.
func TestInbox_RenamedOrClosedFileIsTakenAtOnce(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	startNotifier(t, s)

	renameIn(t, e, "renamed.json", `{"type":"demo.hello","id":"evt-renamed-1"}`)
	waitWake(t, s, "a rename into inbox/")
	e.tick(s)
	if got := sorted(e.pending()); got != "evt-renamed-1" {
		t.Fatalf("after rename: pending %s", got)
	}

	// Written in place and closed (os.WriteFile closes).
	if err := os.WriteFile(filepath.Join(e.l.Inbox(), "closed.json"), []byte(`{"type":"demo.hello","id":"evt-closed-1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitWake(t, s, "a close-write in inbox/")
	e.tick(s)
	if got := sorted(e.pending()); got != sorted([]string{"evt-renamed-1", "evt-closed-1"}) {
		t.Fatalf("after close: pending %s", got)
	}
}

func TestInbox_SlowInPlaceWriterIsNeverReadHalfWritten(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	startNotifier(t, s)

	path := filepath.Join(e.l.Inbox(), "slow.json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := `{"type":"demo.slow","id":"evt-slow-1","payload":{"text":"written in three pieces"}}`
	pieces := []string{body[:10], body[10:40], body[40:]}
	marker := 0
	for i, p := range pieces[:2] {
		if _, err := f.WriteString(p); err != nil {
			t.Fatal(err)
		}
		// A renamed-in marker after the write: its wake-up means the
		// notifier has seen every earlier event (inotify keeps order).
		marker++
		renameIn(t, e, "marker-"+itoa(int64(marker))+".json", `{"type":"demo.marker","id":"evt-marker-`+itoa(int64(marker))+`"}`)
		waitWake(t, s, "the marker")
		// Far past the old 1 s rule (the writer "paused" for seconds) but
		// within the stall bound.
		e.clk.Set(time.Now().Add(time.Duration(i+2) * 5 * time.Second))
		e.tick(s)
		for _, id := range e.pending() {
			if id == "evt-slow-1" {
				t.Fatalf("read after piece %d of 3, while its writer still had it open", i+1)
			}
		}
		if !exists(path) {
			t.Fatalf("half-written file gone after piece %d (rejected?)", i+1)
		}
	}
	if _, err := f.WriteString(pieces[2]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitWake(t, s, "the writer's close")
	e.tick(s)
	if ev := e.event("evt-slow-1"); ev.Payload["text"] != "written in three pieces" {
		t.Fatalf("event = %+v", ev)
	}
	if exists(path) || len(entries(t, e.l.InboxRejected())) != 0 {
		t.Errorf("file left (%v) or something rejected (%v)", exists(path), entries(t, e.l.InboxRejected()))
	}
}

// A file opened for writing whose close never comes (a hung writer, a hard
// link) is read once it stayed unchanged for StallAge.
func TestInbox_UnclosedFileIsReadAfterTheStallAge(t *testing.T) {
	e := newEnv(t)
	s := e.sentinel(e.config(inboxYAML))
	startNotifier(t, s)
	path := filepath.Join(e.l.Inbox(), "hung.json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"type":"demo.hung","id":"evt-hung-1"}`); err != nil {
		t.Fatal(err)
	}
	renameIn(t, e, "marker.json", `{"type":"demo.marker","id":"evt-marker-1"}`)
	waitWake(t, s, "the marker")
	e.clk.Set(time.Now().Add(30 * time.Second))
	e.tick(s)
	if exists(filepath.Join(e.l.QueueState("events", "pending"), "evt-hung-1.json")) {
		t.Fatal("an open file was read before the stall age")
	}
	e.clk.Set(time.Now().Add(2 * time.Minute))
	e.tick(s)
	if got := sorted(e.pending()); got != sorted([]string{"evt-marker-1", "evt-hung-1"}) {
		t.Fatalf("pending %s", got)
	}
	// The hung writer still holds its file: admission removed its name,
	// so the writer's late bytes reach no file anybody reads.
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 {
		t.Errorf("the hung writer's file still has %d link(s) after admission, want it removed", st.Nlink)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}
