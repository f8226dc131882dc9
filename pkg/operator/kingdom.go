package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// QueueKinds are the three queues, in display order.
var QueueKinds = []string{layout.QEvents, layout.QTasks, layout.QMessages}

// Lister lists the live tmux sessions (tmux.Client does).
type Lister interface {
	List(ctx context.Context) ([]tmux.Session, error)
}

// RoleStatus is one role's row.
type RoleStatus struct {
	Name         string
	SessionAlive bool
	HeartbeatAge time.Duration // -1 when no heartbeat yet
	LeaderPID    int           // 0 when nobody holds the lock
	// SinceSession is how long ago its tmux session was created (0: no
	// session, or tmux did not say).
	SinceSession time.Duration
}

// Up is SPEC §9.14's liveness: a live session whose last sign of life is
// within threshold, where a heartbeat older than the session (a freshly
// relaunched role that has not ticked yet) counts from the session's
// creation, as the chamberlain judges it.
func (r RoleStatus) Up(threshold time.Duration) bool {
	if !r.SessionAlive || r.HeartbeatAge < 0 {
		return false
	}
	age := r.HeartbeatAge
	if r.SinceSession > 0 && r.SinceSession < age {
		age = r.SinceSession
	}
	return age <= threshold
}

// Kingdom is the one-screen state of an installation without changing
// anything (ReadKingdom): every role's tmux session, heartbeat age and
// leader pid, the queue depths, the registered soldiers and the health
// snapshot. `start status` (ReadStatus) and the chamberlain's dashboard
// read it here.
type Kingdom struct {
	StartPID int
	Roles    []RoleStatus
	Queues   map[string]map[string]int // kind → state → count
	// QueuesErr is why some queue could not be counted (its states then
	// read 0): the shared store could not be read.
	QueuesErr      error
	Soldiers       []sessions.Entry // registered soldiers (sessions.json)
	ActiveSoldiers int
	Health         health.Snapshot
	HealthErr      error
}

// RoleNames are the core roles followed by every installed general's name
// (the valid manifests, even beside a broken file).
func RoleNames(l layout.Layout) []string {
	names := append([]string{}, layout.CoreRoles...)
	ms, _ := config.LoadManifests(l.GeneralsConfigDir())
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

// ReadKingdom gathers the state without changing anything, counting the
// store's queues qs (by kind). A tmux that cannot be listed (or a nil tc)
// is the error returned beside the rest, whose sessions then show as down;
// everything else that cannot be read shows as absent.
func ReadKingdom(ctx context.Context, l layout.Layout, tc Lister, now time.Time, qs map[string]*queue.Queue) (*Kingdom, error) {
	k := &Kingdom{}
	if held, pid := lockfile.Held(l.LeaderLock(layout.RoleStart)); held {
		k.StartPID = pid
	}
	var live []tmux.Session
	tmuxErr := errors.New("no tmux client")
	if tc != nil {
		live, tmuxErr = tc.List(ctx)
	}
	alive := map[string]bool{}
	created := map[string]time.Time{}
	for _, s := range live {
		alive[s.Name], created[s.Name] = true, s.Created
	}
	for _, n := range RoleNames(l) {
		rs := RoleStatus{Name: n, SessionAlive: alive[n], HeartbeatAge: -1}
		if c := created[n]; !c.IsZero() && !c.After(now) {
			rs.SinceSession = now.Sub(c)
		}
		if fi, err := os.Stat(l.Heartbeat(n)); err == nil {
			// now was read before the store and tmux answered: a role that
			// beat since then has a heartbeat younger than now, which is
			// 0 old, never "no heartbeat" (the -1 of a negative age).
			rs.HeartbeatAge = max(now.Sub(fi.ModTime()), 0)
		}
		if held, pid := lockfile.Held(l.LeaderLock(n)); held {
			rs.LeaderPID = pid
		}
		k.Roles = append(k.Roles, rs)
	}
	k.Queues, k.QueuesErr = Depths(qs)
	if es, err := sessions.New(l).Read(); err == nil {
		k.Soldiers, k.ActiveSoldiers = es, len(es)
	}
	k.Health, k.HealthErr = health.Read(l.Resources(), now)
	return k, tmuxErr
}

// Depths counts the ids in every state of the queues qs (by kind), the
// store's, which every host sees alike: each state is one listing. A
// state that cannot be listed counts 0 and its error is returned (the
// first one).
func Depths(qs map[string]*queue.Queue) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	var first error
	for _, kind := range QueueKinds {
		out[kind] = map[string]int{}
		q := qs[kind]
		if q == nil {
			continue
		}
		for _, s := range layout.QueueStates[kind] {
			idl, err := q.IDs(s)
			if err != nil && first == nil {
				first = fmt.Errorf("count %s/%s: %w", kind, s, err)
			}
			out[kind][s] = len(idl)
		}
	}
	return out, first
}
