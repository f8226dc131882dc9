package chamberlain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
	"github.com/kingdom-dev/kingdom/pkg/watchstatus"
)

// Resources is state/resources.json (pkg/health owns the shape).
type Resources = health.Resources

// Role states in a Report.
const (
	RoleOK         = "ok"
	RoleDead       = "dead"
	RoleNotStarted = "not started"
	RoleStarting   = "starting" // session newer than its heartbeat
	// RoleStandby: a leader role whose lease a live session on another
	// host holds (RoleStatus.Standby names it); it does not tick here.
	RoleStandby = "standby"
	// RoleStoreWait: the role waits for a store it cannot reach (its
	// outage record, or this check's own store errors, say so).
	RoleStoreWait = "waiting for the store"
)

// RoleStatus is one watched role.
type RoleStatus struct {
	Name      string
	State     string
	Heartbeat time.Time // zero when the role never started
	Age       time.Duration
	Session   bool
	PID       int
	Created   time.Time
	// Standby is the host leading this role while this host's instance
	// stands by (State RoleStandby).
	Standby string
	// Outage is the role's record of a store it cannot reach (nil: none,
	// or no session to explain).
	Outage *Outage
}

// QueueDepth is the number of files in one queue state.
type QueueDepth struct {
	Queue, State string
	Count        int
}

// Report is one evaluation of the kingdom's health.
type Report struct {
	Time       time.Time
	Sample     Sample
	MetricsErr error
	Health     string // "" when metrics could not be read
	Reason     string
	Thresholds config.Thresholds
	Resources  *Resources // nil when metrics could not be read

	Roles []RoleStatus

	Registered   []sessions.Entry // soldier registry (after pruning, in daemon mode)
	Unregistered []tmux.Session   // soldier-* sessions registered nowhere, older than the grace
	TmuxErr      error
	tmuxByName   map[string]tmux.Session

	Tokens   health.Tokens
	TokenErr error

	// Money is today's spend, budget and engine pauses.
	Money *report.Money

	// Paused is the operator's pause (state/king/paused.json), nil when
	// the kingdom is not paused.
	Paused *control.Pause
	// Parks are the breaker's parks (pkg/parks, SPEC §12.4): each a
	// warning of the verdict. Its one Slack alert is the king's.
	Parks []parks.Park
	// Watchers is the sentinel's record of its watchers' polls.
	Watchers map[string]watchstatus.Watcher
	// WatchersErr: watchers.json did not load, so Watchers says nothing
	// about which failures ended.
	WatchersErr error

	Queues []QueueDepth
	Errors []string // things that could not be read
	// ConfigErr is set when the installed manifests do not load: the roles
	// start should run cannot be known (chamberlain --once exits 3).
	ConfigErr error

	// StoreErr: this check could not reach the store (since the daemon's
	// own outage record says, or since this check); the store's other
	// reads were skipped. storeErr is the error itself, for the tick.
	StoreErr *Outage
	storeErr error
	// Leaders are the store's leaderships (nil when unread).
	Leaders map[string]store.LeaderInfo
	// Lost are the hosts silent past store.takeover_seconds and not yet
	// forgotten (`start hosts forget`).
	Lost []store.Host
	// Horizon is what holds the event log back (nil when unread).
	Horizon *store.Horizon
}

// errNoChange aborts a sessions.json update that would change nothing.
var errNoChange = errors.New("no change")

func (r *Role) observe(ctx context.Context, now time.Time) (*Report, error) {
	rep := &Report{Time: now, Thresholds: r.c.Thresholds}
	var errs []error

	s, err := r.met.Sample(ctx)
	if err != nil {
		rep.MetricsErr = err
		errs = append(errs, err)
	} else {
		s.CPU, s.Memory, s.Disk = round1(s.CPU), round1(s.Memory), round1(s.Disk)
		for i := range s.Load {
			s.Load[i] = round2(s.Load[i])
		}
		rep.Sample = s
		rep.Health, rep.Reason = Evaluate(s, r.c.Thresholds)
	}

	if err := r.observeSessions(ctx, now, rep); err != nil {
		rep.TmuxErr = err
		errs = append(errs, err)
	}
	r.observeStore(ctx, rep)
	if rep.storeErr != nil {
		errs = append(errs, rep.storeErr) // the runner waits it out (SPEC §12.2)
	}
	r.observeRoles(now, rep)
	if rep.StoreErr == nil {
		r.observeMoney(ctx, now, rep)
	}
	r.observeOperator(ctx, rep)
	r.observeTokens(now, rep)
	qs := map[string]*queue.Queue{layout.QEvents: r.events, layout.QTasks: r.tasks, layout.QMessages: r.messages}
	for _, q := range []struct{ kind, state string }{
		{layout.QEvents, layout.Pending}, {layout.QEvents, layout.Petitioning}, {layout.QEvents, layout.Dispatched},
		{layout.QTasks, layout.Pending}, {layout.QTasks, layout.InProgress},
		{layout.QMessages, layout.Pending}, {layout.QMessages, layout.Failed},
	} {
		if rep.StoreErr != nil {
			break // a store that does not answer counts nothing
		}
		rep.Queues = append(rep.Queues, QueueDepth{Queue: q.kind, State: q.state, Count: qs[q.kind].Count(q.state)})
	}

	if rep.MetricsErr == nil {
		list := make([]string, 0, len(rep.tmuxByName))
		for n := range rep.tmuxByName {
			list = append(list, n)
		}
		sort.Strings(list)
		res := &Resources{
			Timestamp: doc.FormatTime(now),
			System: health.SystemStats{
				CPUPercent: s.CPU, MemoryPercent: s.Memory, DiskPercent: s.Disk, LoadAverage: s.Load,
			},
			Sessions: health.SessionStats{SoldiersActive: len(rep.Registered), SoldiersMax: r.cfg.MaxSoldiers, List: list},
			Health:   rep.Health,
		}
		tk := rep.Tokens
		res.Tokens = &tk
		if m := rep.Money; m != nil {
			b := m.Budget
			res.Budget = &b
			if len(m.Pauses) > 0 {
				res.EnginePauses = m.Pauses
			}
		}
		rep.Resources = res
	}
	return rep, errors.Join(errs...)
}

// observeSessions lists tmux once. In daemon mode it does so holding
// sessions.lock and prunes registry entries whose session is gone and that
// are older than the orphan grace (SPEC §9.12); otherwise it only reads.
func (r *Role) observeSessions(ctx context.Context, now time.Time, rep *Report) error {
	grace := r.c.OrphanGrace()
	var listed []tmux.Session
	var keep, pruned, adopted []sessions.Entry
	index := func(ss []tmux.Session) map[string]bool {
		alive := make(map[string]bool, len(ss))
		rep.tmuxByName = make(map[string]tmux.Session, len(ss))
		for _, s := range ss {
			alive[s.Name] = true
			rep.tmuxByName[s.Name] = s
		}
		return alive
	}
	if r.mode == ModeDaemon {
		err := r.reg.Update(func(es []sessions.Entry) ([]sessions.Entry, error) {
			ss, err := r.tm.List(ctx)
			if err != nil {
				return nil, err
			}
			listed = ss
			alive := index(ss)
			keep, pruned = nil, nil
			for _, e := range es {
				if alive[e.ID] || now.Sub(e.StartedAt) < grace {
					keep = append(keep, e)
				} else {
					pruned = append(pruned, e)
				}
			}
			adopted = r.liveUnregistered(keep, ss)
			if len(pruned) == 0 && len(adopted) == 0 {
				return nil, errNoChange
			}
			keep = append(keep, adopted...)
			return keep, nil
		})
		if err != nil && !errors.Is(err, errNoChange) {
			return fmt.Errorf("reconcile sessions: %w", err)
		}
		for _, e := range adopted {
			r.log.Warn("re-registered a live soldier missing from the registry", "soldier", e.ID, "task", e.TaskID, "general", e.General, "cat", "RECOVERY")
		}
		for _, e := range pruned {
			r.log.Info("removed dead session from registry", "soldier", e.ID, "task", e.TaskID, "cat", "CLEANUP")
			r.emit("system.session_orphaned", map[string]any{"soldier_id": e.ID, "task_id": e.TaskID, "general": e.General})
		}
		if len(pruned) > 0 {
			r.emit("recovery.sessions_cleaned", map[string]any{"removed_count": len(pruned)})
		}
	} else {
		// A reader takes the registry as it is (under the shared lock) and
		// prunes nothing: pruning is the daemon's.
		es, rerr := r.reg.Read()
		if rerr != nil {
			rep.Errors = append(rep.Errors, rerr.Error())
			// An unreadable registry is rebuilt from what is on disk: an empty
			// list would hide running soldiers.
			es = sessions.Rebuild(r.l)
		}
		ss, err := r.tm.List(ctx)
		if err != nil {
			index(nil)
			rep.Registered = es
			return fmt.Errorf("list tmux sessions: %w", err)
		}
		listed = ss
		index(ss)
		keep = append(es, r.liveUnregistered(es, ss)...) // nothing is pruned or written by a reader
	}
	rep.Registered = keep
	for _, s := range unregistered(keep, listed) {
		if !s.Created.IsZero() && now.Sub(s.Created) >= grace {
			rep.Unregistered = append(rep.Unregistered, s)
		}
	}
	return nil
}

// unregistered returns the listed soldier sessions that es lacks.
func unregistered(es []sessions.Entry, listed []tmux.Session) []tmux.Session {
	registered := make(map[string]bool, len(es))
	for _, e := range es {
		registered[e.ID] = true
	}
	var out []tmux.Session
	for _, s := range listed {
		if strings.HasPrefix(s.Name, "soldier-") && !registered[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// liveUnregistered returns registry entries for the listed soldier sessions
// that es lacks but that an in-progress task names as its soldier (its
// <task>-soldier-id). A live soldier of an in-progress task is never an
// orphan, whatever the registry says (truncated to nothing, rewritten
// without it): killing it would retry a task whose agent is at work and
// repeat its side effects. The task queue is read only when some soldier
// session is unregistered.
func (r *Role) liveUnregistered(es []sessions.Entry, listed []tmux.Session) []sessions.Entry {
	missing := map[string]bool{}
	for _, s := range unregistered(es, listed) {
		missing[s.Name] = true
	}
	if len(missing) == 0 {
		return nil
	}
	var out []sessions.Entry
	for _, e := range sessions.Rebuild(r.l) {
		if missing[e.ID] {
			out = append(out, e)
			delete(missing, e.ID) // one entry per soldier
		}
	}
	return out
}

// watchedRoles returns sentinel, king, envoy and every installed general
// (config/generals/*.yaml), plus the chamberlain itself for reports.
func (r *Role) watchedRoles(rep *Report) []string {
	names := []string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy}
	ms, err := config.LoadManifests(r.l.GeneralsConfigDir())
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		rep.ConfigErr = err
	}
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return append(names, layout.RoleChamberlain)
}

// observeRoles reads each role's heartbeat. A heartbeat older than the
// role's current session is ignored (a freshly relaunched role has not
// ticked yet, SPEC §9.14): the session's creation counts as last seen. A
// live session whose silence the store explains is not dead: a leader role
// another host leads stands by, and a role waiting for an unreachable
// store (its outage record, or this check's own store errors) is weather.
func (r *Role) observeRoles(now time.Time, rep *Report) {
	threshold := r.c.HeartbeatThreshold()
	for _, name := range r.watchedRoles(rep) {
		st := RoleStatus{Name: name, State: RoleNotStarted}
		if s, ok := rep.tmuxByName[name]; ok {
			st.Session, st.PID, st.Created = true, s.PID, s.Created
		}
		if fi, err := os.Stat(r.l.Heartbeat(name)); err == nil {
			st.Heartbeat = fi.ModTime()
			seen := st.Heartbeat
			st.State = RoleOK
			if st.Session && st.Created.After(seen) {
				seen = st.Created
				st.State = RoleStarting
			}
			st.Age = now.Sub(seen)
			if st.Age > threshold {
				st.State = RoleDead
			}
		}
		live := st.Session || rep.TmuxErr != nil
		if o := readOutage(r.l, name); o != nil && live {
			st.Outage, st.State = o, RoleStoreWait
		} else if h := rep.leaderElsewhere(name, r.host); h != "" && st.Session && st.State != RoleOK {
			st.Standby, st.State = h, RoleStandby
		} else if rep.StoreErr != nil && st.Session && (st.State == RoleDead || st.State == RoleNotStarted) {
			st.State = RoleStoreWait
		}
		rep.Roles = append(rep.Roles, st)
	}
}

// observeTokens re-reads the token stats every monitoring_interval_seconds
// (each call outside the daemon).
func (r *Role) observeTokens(now time.Time, rep *Report) {
	if r.mode != ModeDaemon || r.lastTokens.IsZero() || now.Sub(r.lastTokens) >= r.c.TokenMonitoringInterval() || now.Before(r.lastTokens) {
		r.tokens, r.tokenErr = report.Tokens(r.c, r.cfg.Budget, now, rep.Money)
		r.lastTokens = now
	}
	rep.Tokens, rep.TokenErr = r.tokens, r.tokenErr
}

// observeOperator reads the pause, the parks and the sentinel's watcher
// record.
func (r *Role) observeOperator(ctx context.Context, rep *Report) {
	if rep.StoreErr == nil {
		p, err := control.ReadPause(ctx, r.kv)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		rep.Paused = p
		if rep.Parks, err = parks.List(ctx, r.kv); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	ws, err := watchstatus.Load(watchstatus.Path(r.l))
	if err != nil {
		rep.WatchersErr = err
		rep.Errors = append(rep.Errors, err.Error())
	}
	rep.Watchers = ws.Watchers
}
