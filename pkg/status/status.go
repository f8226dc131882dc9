// Package status reads the one-screen state of an installation without
// changing anything: every role's tmux session, heartbeat age and leader
// pid, the queue depths, the registered soldiers and the health snapshot.
// `start status` prints it; the chamberlain's dashboard serves it.
//
// Drive it with status.ReadOn(ctx, l, tmuxClient, now, queues), the queues
// (by kind) those of the installation's store; Read counts the queue files
// under l instead.
package status

import (
	"context"
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

// CoreRoles are the always-on roles besides the generals.
var CoreRoles = []string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy, layout.RoleChamberlain}

// QueueKinds are the three queues, in display order.
var QueueKinds = []string{layout.QEvents, layout.QTasks, layout.QMessages}

// Lister lists the live tmux sessions (tmux.Client does).
type Lister interface {
	List(ctx context.Context) ([]tmux.Session, error)
}

// Role is one role's row.
type Role struct {
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
func (r Role) Up(threshold time.Duration) bool {
	if !r.SessionAlive || r.HeartbeatAge < 0 {
		return false
	}
	age := r.HeartbeatAge
	if r.SinceSession > 0 && r.SinceSession < age {
		age = r.SinceSession
	}
	return age <= threshold
}

// Kingdom is the one-screen state of an installation.
type Kingdom struct {
	StartPID int
	Roles    []Role
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
	names := append([]string{}, CoreRoles...)
	ms, _ := config.LoadManifests(l.GeneralsConfigDir())
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

// Read gathers the state without changing anything, counting the store's
// queues qs (by kind). Only a failing tmux listing is an error; everything
// else that cannot be read shows as absent.
func Read(ctx context.Context, l layout.Layout, tc Lister, now time.Time, qs map[string]*queue.Queue) (*Kingdom, error) {
	st := &Kingdom{Queues: map[string]map[string]int{}}
	if held, pid := lockfile.Held(l.LeaderLock(layout.RoleStart)); held {
		st.StartPID = pid
	}
	live, err := tc.List(ctx)
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	created := map[string]time.Time{}
	for _, s := range live {
		alive[s.Name], created[s.Name] = true, s.Created
	}
	for _, n := range RoleNames(l) {
		rs := Role{Name: n, SessionAlive: alive[n], HeartbeatAge: -1}
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
		st.Roles = append(st.Roles, rs)
	}
	st.Queues, st.QueuesErr = Depths(qs)
	if es, err := sessions.New(l).Read(); err == nil {
		st.Soldiers = es
		st.ActiveSoldiers = len(es)
	}
	st.Health, st.HealthErr = health.Read(l.Resources(), now)
	return st, nil
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
