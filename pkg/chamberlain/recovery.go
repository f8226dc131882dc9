package chamberlain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// act applies the daemon's decisions: orphan kills, the dead-role table,
// and every alert condition. The conditions read from the event log and the
// money alerts are the cluster's: only its leader (cluster) evaluates them.
func (r *Role) act(ctx context.Context, rep *Report, now time.Time, cluster bool) error {
	var errs []string
	for _, s := range rep.Unregistered {
		if err := r.tm.Kill(ctx, s.Name); err != nil {
			errs = append(errs, fmt.Sprintf("kill orphan %s: %v", s.Name, err))
			continue
		}
		r.log.Info("killed unregistered soldier session", "soldier", s.Name, "age", now.Sub(s.Created).Round(time.Second), "cat", "RECOVERY")
		r.emit("recovery.session_killed", map[string]any{"soldier_id": s.Name, "reason": "orphaned"})
	}

	var conds []condition
	kinds := []string{KindRole, KindFailures, KindTimeouts, KindResults}
	if rep.Resources != nil {
		kinds = append(kinds, KindHealth, KindDisk)
		if rep.Health == Red {
			conds = append(conds, condition{Kind: KindHealth, Key: Red, Urgency: doc.UrgencyHigh,
				Content: fmt.Sprintf("[urgent] System health RED — CPU %.1f%%, memory %.1f%% (red above %.0f%% / %.0f%%)",
					rep.Sample.CPU, rep.Sample.Memory, r.c.Thresholds.CPURed, r.c.Thresholds.MemoryRed)})
		}
		if rep.Sample.Disk > r.c.Thresholds.DiskWarning {
			conds = append(conds, condition{Kind: KindDisk, Key: "base", Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("Disk usage %.1f%% on the filesystem of %s — over the %.0f%% threshold",
					rep.Sample.Disk, r.l.Base, r.c.Thresholds.DiskWarning)})
		}
	}
	if rep.Money != nil && cluster {
		kinds = append(kinds, KindLedger)
		conds = append(conds, r.ledgerConditions(rep.Money)...)
	}
	rc, err := r.deadRoles(ctx, rep, now)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if rep.TmuxErr != nil {
		// Without a session list, role states are unknown: keep their alerts
		// as they are rather than announcing a recovery.
		kinds = kinds[1:]
	} else {
		conds = append(conds, rc...)
	}
	if rep.WatchersErr == nil {
		// An unreadable record is no sign that a failure ended.
		kinds = append(kinds, KindWatcher)
		conds = append(conds, watcherConditions(rep)...)
	}
	var stale []string
	if cluster {
		var ac []condition
		ac, stale = r.anomalies(ctx, now)
		conds = append(conds, ac...)
	} else {
		// Another host leads the cluster duties: its alerts of these kinds
		// are its own; ours stay as they were until this host leads again.
		kinds = slices.DeleteFunc(kinds, clusterKind)
	}
	if holdsEvents(rep.Money) {
		// Events held back by an engine pause or a used-up budget are
		// waiting on purpose, not stuck (SPEC §10.7, §10.8): reconsidered
		// once the hold ends.
		stale = nil
	}

	al := &alerter{st: &r.alerts, repeat: r.c.AlertRepeat(), send: func(kind, key, urgency, content string, at time.Time) error {
		data := map[string]any{"kind": kind, "key": key}
		key, content = r.hostScoped(kind, key, content)
		return r.putMessage(ctx, doc.MessageNotification, kind, key, urgency, content, data, at)
	}}
	if err := al.evaluate(now, kinds, conds); err != nil {
		errs = append(errs, err.Error())
	}
	if cluster {
		errs = append(errs, r.moneyAlerts(ctx, rep, now)...)
	}
	// Persist what was sent at once, not at the end of the tick: alert ids
	// carry the send time, so a crash before the save would re-send them
	// under new ids after a restart.
	if err := r.saveAlerts(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(stale) > 0 {
		// Each stale event is warned and alerted exactly once, but the
		// events that turn stale in one tick share one message: a queue
		// held back by admission must not become a storm of messages.
		sort.Strings(stale)
		var lines []string
		for _, id := range stale {
			age := now.Sub(r.anomaly.Detected[id]).Round(time.Minute)
			r.log.Warn("event detected but not dispatched", "event", id, "age", age)
			lines = append(lines, fmt.Sprintf("%s (%s)", id, age))
		}
		shown := lines
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("… and %d more", len(lines)-10))
		}
		content := fmt.Sprintf("[anomaly] %d event%s detected but still not dispatched after %d minutes: %s. "+
			"If the king is running, admission may be holding them (health, token budget or max_soldiers) — see `start status`.",
			len(stale), plural(len(stale)), r.c.Anomaly.EventStaleMinutes, strings.Join(shown, ", "))
		key := stale[0]
		if len(stale) > 1 {
			key = fmt.Sprintf("%s-and-%d", stale[0], len(stale)-1)
		}
		if err := r.putMessage(ctx, doc.MessageNotification, KindStale, key, doc.UrgencyNormal, content,
			map[string]any{"kind": KindStale, "event_ids": stale}, now); err != nil {
			errs = append(errs, err.Error())
		} else {
			for _, id := range stale {
				r.anomaly.StaleAlerted[id] = now
			}
		}
	}
	return joinErrs(errs)
}

// deadRoles applies the dead-role table to every role whose heartbeat is
// stale and returns the alert conditions that hold.
func (r *Role) deadRoles(ctx context.Context, rep *Report, now time.Time) ([]condition, error) {
	var conds []condition
	var errs []string
	threshold := r.c.HeartbeatThreshold()
	watched := map[string]bool{}
	for _, st := range rep.Roles {
		watched[st.Name] = true
	}
	for name := range r.state.Roles {
		if !watched[name] {
			delete(r.state.Roles, name) // uninstalled general: no longer ours to watch
		}
	}
	for _, st := range rep.Roles {
		if st.Name == layout.RoleChamberlain {
			continue // that is us
		}
		down := r.state.Roles[st.Name]
		if st.State != RoleDead {
			if down != nil {
				if st.Session && st.PID != 0 && st.PID != down.SeenPID {
					r.log.Info("role is back in a new session", "role", st.Name, "pid", st.PID, "cat", "RECOVERY")
					r.emit("recovery.session_restarted", map[string]any{"target": st.Name, "role": st.Name, "pid": st.PID})
				}
				delete(r.state.Roles, st.Name)
			}
			continue
		}
		if down == nil {
			down = &RoleDown{Since: now, LastSeen: st.Heartbeat, SeenPID: st.PID}
			r.state.Roles[st.Name] = down
			r.log.Warn(fmt.Sprintf("heartbeat missed: %s (%s > %s)", st.Name, st.Age.Round(time.Second), threshold), "cat", "HEARTBEAT")
			r.emit("system.heartbeat_missed", map[string]any{
				"target": st.Name, "last_seen": doc.FormatTime(st.Heartbeat), "threshold_seconds": r.c.Heartbeat.ThresholdSeconds,
			})
		}
		// Whether a hung session is killed so that start relaunches it
		// (SPEC §9.14): the sentinel per auto_recovery.restart_sentinel, the
		// others per restart_others.
		restart := r.c.AutoRecovery.RestartOthers
		if st.Name == layout.RoleSentinel {
			restart = r.c.AutoRecovery.RestartSentinel
		}
		if st.Session && restart {
			// Hung: alive but not ticking. Kill its process tree first (a
			// stopped or wedged process ignores the SIGHUP of kill-session
			// and would keep its leader lock, so the relaunch could not
			// lead), then the session; start's watchdog relaunches it.
			proctree.Kill(proctree.Descendants(st.PID)) // its process groups too; pid ≤ 1 is none
			if err := r.tm.Kill(ctx, st.Name); err != nil {
				errs = append(errs, fmt.Sprintf("kill hung %s: %v", st.Name, err))
			} else {
				down.KilledPID = st.PID
				down.SeenPID = st.PID
				r.log.Info("killed hung session; start relaunches it", "role", st.Name, "pid", st.PID, "cat", "RECOVERY")
			}
		}
		killed := 0
		// SPEC §9.14: a general's soldiers are killed only once it is not
		// coming back — start's crash-loop guard gave up (or start is gone),
		// seen as its session still missing a full watchdog round later. A
		// relaunched general re-attaches its live soldiers (§9.4), so killing
		// them any sooner would only waste their work.
		givenUp := !st.Session && now.Sub(down.Since) >= r.cfg.WatchdogInterval+r.c.MonitoringInterval()
		if strings.HasPrefix(st.Name, "gen-") && givenUp {
			n, err := r.killSoldiersOf(ctx, st.Name, rep)
			killed = n
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		ago := now.Sub(st.Heartbeat).Round(time.Second)
		switch {
		case st.Name == layout.RoleKing:
			conds = append(conds, condition{Kind: KindRole, Key: st.Name, Urgency: doc.UrgencyHigh,
				Content: fmt.Sprintf("[urgent] king missed its heartbeat (last %s ago): no events are routed. start relaunches it; check `tmux attach -t king` and logs/system.log", ago)})
		case restart && now.Sub(down.Since) < r.cfg.WatchdogInterval+r.c.MonitoringInterval():
			// Give start's watchdog one round to relaunch it before alerting.
		case strings.HasPrefix(st.Name, "gen-") && givenUp:
			conds = append(conds, condition{Kind: KindRole, Key: st.Name, Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("%s stopped and was not relaunched (last heartbeat %s ago); its soldiers were killed (%d this round)", st.Name, ago, killed)})
		case strings.HasPrefix(st.Name, "gen-"):
			conds = append(conds, condition{Kind: KindRole, Key: st.Name, Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("%s missed its heartbeat (last %s ago); its soldiers keep running until it is relaunched or given up on", st.Name, ago)})
		case restart:
			conds = append(conds, condition{Kind: KindRole, Key: st.Name, Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("%s is still down after a watchdog round (last heartbeat %s ago) — manual recovery needed", st.Name, ago)})
		default:
			conds = append(conds, condition{Kind: KindRole, Key: st.Name, Urgency: doc.UrgencyNormal,
				Content: fmt.Sprintf("%s missed its heartbeat (last %s ago) — check `tmux attach -t %s`", st.Name, ago, st.Name)})
		}
	}
	return conds, joinErrs(errs)
}

// killSoldiersOf kills the live soldier sessions of general g: those named
// by <task>-soldier-id of its in-progress tasks and those registered to it
// in sessions.json (seed 000 kill_soldiers_of_dead_general).
func (r *Role) killSoldiersOf(ctx context.Context, g string, rep *Report) (int, error) {
	targets := map[string]string{} // soldier → task
	idl, err := r.tasks.IDs(layout.InProgress)
	if err != nil {
		return 0, fmt.Errorf("list in-progress tasks: %w", err)
	}
	for _, id := range idl {
		var t doc.Task
		if err := r.tasks.ReadJSON(layout.InProgress, id, &t); err != nil {
			continue // gone or unreadable: not ours to judge
		}
		if t.TargetGeneral != g {
			continue
		}
		b, err := queue.ReadLimited(r.l.ResultSoldierID(id), 4096)
		if err != nil {
			continue
		}
		if sid := strings.TrimSpace(string(b)); sid != "" {
			targets[sid] = id
		}
	}
	for _, e := range rep.Registered {
		if e.General == g {
			if _, ok := targets[e.ID]; !ok {
				targets[e.ID] = e.TaskID
			}
		}
	}
	var errs []error
	n := 0
	for sid, task := range targets {
		if _, alive := rep.tmuxByName[sid]; !alive || !strings.HasPrefix(sid, "soldier-") {
			continue
		}
		if err := r.tm.Kill(ctx, sid); err != nil {
			errs = append(errs, fmt.Errorf("kill soldier %s: %w", sid, err))
			continue
		}
		delete(rep.tmuxByName, sid)
		n++
		r.log.Info("killed soldier of dead general", "soldier", sid, "general", g, "task", task, "cat", "RECOVERY")
		r.emit("soldier.killed", map[string]any{"soldier_id": sid, "reason": "general_dead", "general": g, "task_id": task})
	}
	return n, errors.Join(errs...)
}

// watcherConditions are the sentinel's watchers failing on every poll: its
// tick still succeeds and its heartbeat stays fresh, so nothing else shows
// that no event arrives from that source.
func watcherConditions(rep *Report) []condition {
	var conds []condition
	for _, name := range slices.Sorted(maps.Keys(rep.Watchers)) {
		w := rep.Watchers[name]
		if !w.Failing() {
			continue
		}
		conds = append(conds, condition{Kind: KindWatcher, Key: name, Urgency: doc.UrgencyNormal,
			Content: fmt.Sprintf("Sentinel watcher %s failed its last %d polls: %s. No %s events arrive until it is fixed (a revoked or expired token? see logs/system.log).",
				name, w.ConsecutiveFailures, redact.Clip(w.LastError, 300), name)})
	}
	return conds
}

// watcherEvents emits system.watcher_failing when a watcher turns failing
// and system.watcher_recovered when it polls successfully again.
func (r *Role) watcherEvents(rep *Report) {
	if rep.WatchersErr != nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Watchers)) {
		w := rep.Watchers[name]
		if w.Failing() && !r.state.Watchers[name] {
			r.state.Watchers[name] = true
			r.log.Warn("sentinel watcher failing", "watcher", name, "failures", w.ConsecutiveFailures, "err", w.LastError, "cat", "HEALTH")
			r.emit("system.watcher_failing", map[string]any{"watcher": name, "consecutive_failures": w.ConsecutiveFailures, "error": w.LastError})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.state.Watchers)) {
		if !rep.Watchers[name].Failing() {
			delete(r.state.Watchers, name)
			r.log.Info("sentinel watcher recovered", "watcher", name, "cat", "HEALTH")
			r.emit("system.watcher_recovered", map[string]any{"watcher": name})
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
