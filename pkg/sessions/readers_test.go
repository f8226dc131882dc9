package sessions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

// Readers that take no lock (Read, or a plain read of sessions.json) never
// see a partial registry while writers add and remove entries, even when
// every version has a different length.
func TestRegistry_LocklessReadersNeverSeeAPartialRegistry(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	r := sessions.New(l)
	if err := r.Replace(nil); err != nil {
		t.Fatal(err)
	}
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
	for i := 0; i < 200; i++ {
		// A second registry value, as another process has.
		if _, err := sessions.New(l).Read(); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		b, err := os.ReadFile(l.SessionsJSON())
		var es []sessions.Entry
		if err != nil || json.Unmarshal(b, &es) != nil {
			t.Fatalf("plain read %d: %q (%v)", i, b, err)
		}
	}
	close(stop)
	wg.Wait()
}

// A write never goes through a symlink planted at sessions.json's name:
// the link is replaced and the file it pointed at is untouched.
func TestRegistry_NeverWritesThroughASymlink(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	victim := l.Base + "/victim"
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, l.SessionsJSON()); err != nil {
		t.Fatal(err)
	}
	if err := sessions.New(l).Add(sessions.Entry{ID: "soldier-1", TaskID: "t", General: "gen-pr"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Fatalf("victim rewritten through the link: %q", b)
	}
	fi, err := os.Lstat(l.SessionsJSON())
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("sessions.json: %v %v, want a regular 0600 file", fi, err)
	}
}
