package operator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// storeQueues is every queue kind on a files store of l, closed with the
// test.
func storeQueues(t *testing.T, l layout.Layout) map[string]*queue.Queue {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	qs := map[string]*queue.Queue{}
	for _, kind := range QueueKinds {
		qs[kind] = queue.OnStore(st, l, kind, nil, "test-host")
	}
	return qs
}

type sessionsList []tmux.Session

func (s sessionsList) List(context.Context) ([]tmux.Session, error) { return s, nil }

// Read counts the store's queues. The files store lists a state by moving
// its poison to rejected/ on the way (as every consumer's listing does), so
// a poison file counts there, never as a pending document; a dot-temp is
// no document at all.
func TestReadKingdom_CountsTheStoresQueues(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	pending := l.QueueState(layout.QEvents, layout.Pending)
	// A valid-looking file, a poison one (not JSON) and a dot-temp.
	os.WriteFile(filepath.Join(pending, "evt-a.json"), []byte(`{"id":"evt-a"}`), 0o600)
	os.WriteFile(filepath.Join(pending, "evt-b.json"), []byte(`not json`), 0o600)
	os.WriteFile(filepath.Join(pending, ".tmp-x"), []byte(`{}`), 0o600)
	now := time.Now()
	os.WriteFile(l.Heartbeat("king"), nil, 0o600)
	os.Chtimes(l.Heartbeat("king"), now.Add(-5*time.Second), now.Add(-5*time.Second))

	k, err := ReadKingdom(context.Background(), l, sessionsList{{Name: "king"}}, now, storeQueues(t, l))
	if err != nil {
		t.Fatal(err)
	}
	if k.QueuesErr != nil {
		t.Fatal(k.QueuesErr)
	}
	if got := k.Queues[layout.QEvents][layout.Pending]; got != 1 {
		t.Errorf("events pending = %d, want 1 (evt-a)", got)
	}
	if got := k.Queues[layout.QEvents][layout.Rejected]; got != 1 {
		t.Errorf("events rejected = %d, want 1 (the poison evt-b)", got)
	}
	if _, err := os.Stat(filepath.Join(pending, "evt-a.json")); err != nil {
		t.Errorf("a status read moved a valid document: %v", err)
	}
	var king RoleStatus
	for _, r := range k.Roles {
		if r.Name == "king" {
			king = r
		}
	}
	if !king.SessionAlive || king.HeartbeatAge < 4*time.Second || king.HeartbeatAge > 6*time.Second {
		t.Errorf("king %+v", king)
	}
}

// §9.14: a role relaunched a moment ago, whose heartbeat is older than its
// new session, is up (the session counts as its last sign of life); a stale
// heartbeat with an old session, or no session, is not.
func TestRoleStatus_UpCountsASessionNewerThanItsHeartbeat(t *testing.T) {
	const threshold = 90 * time.Second
	for _, c := range []struct {
		r    RoleStatus
		want bool
	}{
		{RoleStatus{SessionAlive: true, HeartbeatAge: 5 * time.Minute, SinceSession: 3 * time.Second}, true},
		{RoleStatus{SessionAlive: true, HeartbeatAge: 5 * time.Minute, SinceSession: 10 * time.Minute}, false},
		{RoleStatus{SessionAlive: true, HeartbeatAge: 10 * time.Second, SinceSession: time.Hour}, true},
		{RoleStatus{SessionAlive: false, HeartbeatAge: 10 * time.Second}, false},
		{RoleStatus{SessionAlive: true, HeartbeatAge: -1, SinceSession: time.Second}, false},
	} {
		if got := c.r.Up(threshold); got != c.want {
			t.Errorf("%+v: up %v, want %v", c.r, got, c.want)
		}
	}
}

// beatingLister is tmux answering while the king beats: the role touches
// its heartbeat (atomicfile.Touch, as runner's beat does) after the reader
// took its now and before it looks at the file.
type beatingLister struct {
	l layout.Layout
	t *testing.T
}

func (b beatingLister) List(context.Context) ([]tmux.Session, error) {
	time.Sleep(20 * time.Millisecond) // tmux's answer takes a moment
	if err := atomicfile.Touch(b.l.Heartbeat("king")); err != nil {
		b.t.Fatal(err)
	}
	return []tmux.Session{{Name: "king", Created: time.Now().Add(-time.Hour)}}, nil
}

// The `start status` flake: a live role shown DOWN with heartbeat
// "never". Its heartbeat, touched after the reader's now, was a negative
// age, the very value that means "no heartbeat".
func TestReadKingdom_HeartbeatTouchedDuringTheReadIsFresh(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(l.RoleStateDir("king"), 0o700)
	atomicfile.Touch(l.Heartbeat("king"))
	now := time.Now()
	k, err := ReadKingdom(context.Background(), l, beatingLister{l, t}, now, storeQueues(t, l))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Roles {
		if r.Name != "king" {
			continue
		}
		if r.HeartbeatAge < 0 || !r.Up(90*time.Second) {
			t.Fatalf("king beating during the read: %+v, want up with a heartbeat 0s old", r)
		}
		return
	}
	t.Fatal("no king row")
}

type failingLister struct{}

func (failingLister) List(context.Context) ([]tmux.Session, error) {
	return nil, errors.New("no server on the socket")
}

// A tmux that cannot be asked is the error, beside the rest of the state:
// every session shows as down, the heartbeats and queues are still read.
func TestReadKingdom_UnlistableTmuxStillReadsTheRest(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(l.QueueState(layout.QTasks, layout.Pending), "task-a.json"), []byte(`{"id":"task-a"}`), 0o600)
	os.MkdirAll(l.RoleStateDir("king"), 0o700)
	atomicfile.Touch(l.Heartbeat("king"))
	now := time.Now()
	for name, tc := range map[string]Lister{"failing": failingLister{}, "nil": nil} {
		k, err := ReadKingdom(t.Context(), l, tc, now, storeQueues(t, l))
		if err == nil || k == nil {
			t.Fatalf("%s tmux: kingdom %v, err %v; want the state and the error", name, k, err)
		}
		if got := k.Queues[layout.QTasks][layout.Pending]; got != 1 {
			t.Errorf("%s tmux: tasks pending = %d, want 1", name, got)
		}
		if len(k.Roles) != len(layout.CoreRoles) {
			t.Fatalf("%s tmux: roles %+v, want the core roles", name, k.Roles)
		}
		for _, r := range k.Roles {
			if r.SessionAlive {
				t.Errorf("%s tmux: %s shows a live session", name, r.Name)
			}
			if (r.Name == "king") != (r.HeartbeatAge >= 0) {
				t.Errorf("%s tmux: %s heartbeat age %v (only the king beat)", name, r.Name, r.HeartbeatAge)
			}
		}
	}
}
