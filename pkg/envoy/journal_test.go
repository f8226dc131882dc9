package envoy

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// An envoy that died after journaling a delivery and moving its message to
// sent/, but before the end-of-tick write of the state files, loses
// nothing: the next envoy replays the journal and the thread mapping is
// there; the message is not posted again.
func TestJournal_ReplayAfterACrashBeforeTheFilesWereWritten(t *testing.T) {
	h := newHarness(t, setup{console: true})
	h.put(message("msg-task-20261121-001-start", "thread_start", "task-20261121-001"))
	// A tick's work without its final flush: what a kill at that instant
	// leaves on disk.
	if err := h.e.sendPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := h.msgState("msg-task-20261121-001-start"); s != "sent" {
		t.Fatalf("message in %q, want sent", s)
	}
	if b, err := os.ReadFile(h.l.EnvoyThreadMappings()); err == nil && len(b) > 3 {
		t.Fatalf("mappings written before the flush: %s", b)
	}
	posted := h.stdout.Len()

	// The restarted envoy (same tree, fresh process state).
	h2 := newHarness(t, setup{console: true})
	h2.l = h.l
	e2, err := New(Options{Layout: h.l, Config: h.e.config(), Events: h.e.em, Clock: h.clock, Stdout: h2.stdout})
	if err != nil {
		t.Fatal(err)
	}
	h2.e = e2
	h2.tick()
	b, err := os.ReadFile(h.l.EnvoyThreadMappings())
	if err != nil {
		t.Fatal(err)
	}
	var mappings map[string]ThreadMapping
	if err := json.Unmarshal(b, &mappings); err != nil {
		t.Fatal(err)
	}
	if _, ok := mappings["task-20261121-001"]; !ok {
		t.Errorf("thread mapping lost across the crash: %s", b)
	}
	if h2.stdout.Len() != 0 || h.stdout.Len() != posted {
		t.Errorf("message posted again after the restart: %q", h2.stdout.String())
	}
	if fi, err := os.Stat(journalPath(h.l)); err != nil || fi.Size() != 0 {
		t.Errorf("journal not emptied after the files were written: %v %v", fi, err)
	}
	if s := h.msgState("msg-task-20261121-001-start"); s != layout.Sent {
		t.Errorf("message in %q", s)
	}
}

// A power loss can leave part of an append at the journal's end; the next
// run's records start on a line of their own and replay (they were glued
// onto the torn one, and lost with it).
func TestJournal_RecordAfterATornLineReplays(t *testing.T) {
	h := newHarness(t, setup{console: true})
	if err := layout.EnsureDir(h.l.RoleStateDir(layout.RoleEnvoy)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journalPath(h.l), []byte(`{"id":"msg-torn","d":{"ts":"17`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.put(message("msg-task-20261121-001-start", "thread_start", "task-20261121-001"))
	if err := h.e.sendPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries, err := h.e.st.j.read()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, je := range entries {
		got = append(got, je.ID)
	}
	if len(got) != 1 || got[0] != "msg-task-20261121-001-start" {
		t.Fatalf("journal replays %v, want only the new record", got)
	}
}
