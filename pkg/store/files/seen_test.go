package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func testStore(t *testing.T, l layout.Layout) *Store {
	t.Helper()
	s, err := Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func event(id string) []byte {
	return []byte(`{"id":"` + id + `","type":"test","source":"inbox","payload":{},"priority":"normal","created_at":"2026-11-21T10:00:00Z","status":"pending"}`)
}

func seen(t *testing.T, s *Store, id string) bool {
	t.Helper()
	ok, err := s.Seen(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// An admitted id is refused while its event is in any state of the queue
// and, once the event is gone, while the seen index holds it; a twin in
// the queue refuses it even after retention dropped the index.
func TestAdmit_DedupesAgainstEveryStateAndSeen(t *testing.T) {
	l := layout.New(t.TempDir())
	s := testStore(t, l)
	ctx := t.Context()
	if err := s.Admit(ctx, "evt-1", event("evt-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(ctx, "evt-1", event("evt-1")); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("second admit: %v", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.Move(layout.QEvents, layout.Pending, layout.Dispatched, "evt-1")
	}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(l.SeenDir()) // the seen index is gone (retention): the twin still refuses
	if err := s.Admit(ctx, "evt-1", event("evt-1")); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("admit with dispatched twin: %v", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.Remove(layout.QEvents, layout.Dispatched, "evt-1")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(ctx, "evt-1", event("evt-1")); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("admit with the seen mark only (written by the refused admit): %v", err)
	}
}

// The seen journal is shared by every admitting process: what one admits,
// another refuses; a line torn by a crash loses nothing that was whole; a
// marker file from before the journal is honoured; retention of a day file
// forgets exactly its ids.
func TestAdmit_SeenJournalIsSharedAcrossProcesses(t *testing.T) {
	l := layout.New(t.TempDir())
	sentinel, envoy := testStore(t, l), testStore(t, l)
	ctx := t.Context()
	if seen(t, envoy, "evt-a") {
		t.Fatal("seen before anything was admitted")
	}
	for _, id := range []string{"evt-a", "evt-b"} {
		if err := sentinel.Admit(ctx, id, event(id)); err != nil {
			t.Fatal(err)
		}
		if err := sentinel.Update(ctx, func(tx store.Tx) error { return tx.Remove(layout.QEvents, layout.Pending, id) }); err != nil {
			t.Fatal(err)
		}
	}
	if !seen(t, envoy, "evt-a") || !seen(t, envoy, "evt-b") {
		t.Fatal("another process does not see what the sentinel admitted")
	}
	if err := envoy.Admit(ctx, "evt-b", event("evt-b")); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("re-admit through another process: %v", err)
	}
	ents, _ := os.ReadDir(l.SeenDir())
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "_") {
		t.Fatalf("seen dir holds %v, want one day journal", ents)
	}
	journal := filepath.Join(l.SeenDir(), ents[0].Name())
	if fi, _ := os.Stat(journal); fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}
	// A crash tore the last append ("evt-c" half written); later appends
	// start on a fresh line.
	f, _ := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("\nevt-c")
	f.Close()
	if err := sentinel.Admit(ctx, "evt-d", event("evt-d")); err != nil {
		t.Fatal(err)
	}
	fresh := testStore(t, l)
	for _, id := range []string{"evt-a", "evt-b", "evt-d"} {
		if !seen(t, fresh, id) {
			t.Errorf("%s forgotten after a torn line", id)
		}
	}
	// A marker file written before the journal existed still counts.
	os.WriteFile(filepath.Join(l.SeenDir(), "evt-legacy"), nil, 0o600)
	if !seen(t, fresh, "evt-legacy") {
		t.Error("legacy marker not honoured")
	}
	// Retention removed the day file: its ids are forgotten, others kept.
	os.Remove(journal)
	if seen(t, fresh, "evt-a") || !seen(t, fresh, "evt-legacy") {
		t.Error("index not rebuilt after its journal was removed")
	}
}
