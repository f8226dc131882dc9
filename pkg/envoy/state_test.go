package envoy

import (
	"os"
	"path/filepath"
	"testing"
)

// A corrupt state file is moved aside beside itself (<file>.corrupt-<unix>)
// and that part of the state starts empty; the other files still load.
func TestState_CorruptFileMovedAside(t *testing.T) {
	h := newHarness(t, setup{})
	good := `{"task-20261121-001": {"channel": "C1", "thread_ts": "1.2", "created_at": "2026-11-21T10:00:00Z"}}` + "\n"
	if err := os.MkdirAll(filepath.Dir(h.l.EnvoyThreadMappings()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.l.EnvoyThreadMappings(), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.l.EnvoyConversations(), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := h.state()
	if m, ok := s.Mappings["task-20261121-001"]; !ok || m.ThreadTS != "1.2" {
		t.Fatalf("mappings %+v", s.Mappings)
	}
	if len(s.Conversations) != 0 {
		t.Fatalf("conversations from a corrupt file: %+v", s.Conversations)
	}
	if _, err := os.Stat(h.l.EnvoyConversations()); !os.IsNotExist(err) {
		t.Errorf("the corrupt file is still in place: %v", err)
	}
	aside, _ := filepath.Glob(h.l.EnvoyConversations() + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != "{torn" {
		t.Errorf("aside holds %q", b)
	}
}
