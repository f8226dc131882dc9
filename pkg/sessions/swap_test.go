package sessions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

func ino(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Issue #17: a write trades places with the kept sibling — after the first
// two writes, sessions.json and its sibling are the same two inodes for
// ever (no create, no free per write), and the registry reads right.
func TestRegistry_WritesReuseTwoInodes(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	r := sessions.New(l)
	for i := 0; i < 2; i++ {
		if err := r.Add(sessions.Entry{ID: fmt.Sprintf("soldier-%d", i), TaskID: "t", General: "gen-pr"}); err != nil {
			t.Fatal(err)
		}
	}
	inodes := map[uint64]bool{ino(t, l.SessionsJSON()): true, ino(t, l.SessionsSwap()): true}
	if len(inodes) != 2 {
		t.Fatalf("sessions.json and its sibling share an inode: %v", inodes)
	}
	for i := 2; i < 40; i++ {
		id := fmt.Sprintf("soldier-%d", i)
		if err := r.Add(sessions.Entry{ID: id, TaskID: "t", General: "gen-pr"}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := r.Remove(id); err != nil {
				t.Fatal(err)
			}
		}
		if n := ino(t, l.SessionsJSON()); !inodes[n] {
			t.Fatalf("write %d made a new inode %d (had %v)", i, n, inodes)
		}
	}
	es, err := r.Read()
	if err != nil || len(es) != 21 { // 0, 1 and the 19 odd ones of 2..39
		t.Fatalf("Read = %d entries, %v; want 21", len(es), err)
	}
}

// Readers under the lock (Read, List) never see a partial registry while
// writers rewrite the sibling in place, even when every version has a
// different length (a shorter version over a longer one cuts the tail).
func TestRegistry_ReadersNeverSeeAPartialRegistry(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	r := sessions.New(l)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("soldier-%d-%d", w, i)
				if err := r.Add(sessions.Entry{ID: id, TaskID: "t", General: "gen-pr", StartedAt: time.Now()}); err != nil {
					t.Error(err)
					return
				}
				if i%3 != 0 {
					if err := r.Remove(id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(w)
	}
	reads := 0
	for ; reads < 100; reads++ {
		// A second registry value, as another process has (its own lock fd).
		es, err := sessions.New(l).Read()
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if _, err := sessions.New(l).List(); err != nil {
			t.Fatalf("list %d: %v", reads, err)
		}
		_ = es
	}
	close(stop)
	wg.Wait()
}

// The sibling is never written through: a symlink or a second hard link
// planted at its name is replaced, and the file it pointed at is untouched.
func TestRegistry_SiblingIsNeverWrittenThrough(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	r := sessions.New(l)
	victim := l.Base + "/victim"
	for _, plant := range []func() error{
		func() error { return os.Symlink(victim, l.SessionsSwap()) },
		func() error { return os.Link(victim, l.SessionsSwap()) },
	} {
		if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(l.SessionsSwap())
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		if err := r.Add(sessions.Entry{ID: "soldier-1", TaskID: "t", General: "gen-pr"}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
			t.Fatalf("victim rewritten through the sibling: %q", b)
		}
		b, err := os.ReadFile(l.SessionsJSON())
		var es []sessions.Entry
		if err != nil || json.Unmarshal(b, &es) != nil || len(es) != 1 {
			t.Fatalf("sessions.json = %q (%v)", b, err)
		}
	}
}
