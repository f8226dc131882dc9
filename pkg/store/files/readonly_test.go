package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// A read-only store (an operator's view of another user's tree) reads what
// the roles wrote, creates nothing, moves no poison and refuses writes.
func TestOpenReadOnly_ReadsAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	l := layout.New(t.TempDir())
	rw, err := Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"id":"evt-1","priority":"normal","created_at":"2026-01-01T00:00:00Z"}`)
	if err := rw.Update(ctx, func(tx store.Tx) error { return tx.PutOnce(layout.QEvents, layout.Pending, "evt-1", doc) }); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	poison := filepath.Join(l.QueueState(layout.QEvents, layout.Pending), "bad.json")
	if err := os.WriteFile(poison, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(l.StateDir(), "store"))

	ro, err := OpenReadOnly(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	docs, err := ro.List(ctx, layout.QEvents, layout.Pending)
	if err != nil || len(docs) != 1 || docs[0].ID != "evt-1" {
		t.Fatalf("list = %v, %v; want evt-1 alone", docs, err)
	}
	if _, err := os.Stat(poison); err != nil {
		t.Fatalf("a read-only listing moved the poison: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.StateDir(), "store")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open created state/store: %v", err)
	}
	if err := ro.Update(ctx, func(tx store.Tx) error { return tx.Set("sequences", "x", []byte("1")) }); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Update = %v, want ErrReadOnly", err)
	}
	if _, err := ro.Lead(ctx, "king"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Lead = %v, want ErrReadOnly", err)
	}
	if err := ro.Emit(ctx, "x", "y", nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Emit = %v, want ErrReadOnly", err)
	}
}

// Deleting a key of a namespace that has no directory yet is no error.
func TestDelete_InANamespaceNeverWrittenIsNoError(t *testing.T) {
	s, err := Open(layout.New(t.TempDir()), "test-host")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.Delete("deliveries", "msg-1"); err != nil {
			return err
		}
		return tx.Delete("buttons", "btn-1")
	})
	if err != nil {
		t.Fatalf("delete in a namespace never written: %v", err)
	}
}

// Close waits for a transaction in flight and refuses the writes after it.
func TestClose_WaitsForTheWriteInFlightAndRefusesLaterOnes(t *testing.T) {
	s, err := Open(layout.New(t.TempDir()), "test-host")
	if err != nil {
		t.Fatal(err)
	}
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx store.Tx) error {
			close(in)
			<-release
			return tx.Set("sequences", "x", []byte("1"))
		})
	}()
	<-in
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Set("sequences", "y", []byte("1")) }); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after Close: %v, want ErrClosed", err)
	}
}
