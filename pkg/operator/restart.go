package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/start"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// ErrUnknownRole: `start restart` was given a name that is not an installed role.
var ErrUnknownRole = errors.New("unknown role")

// RestartRole stops role's tmux session (SIGTERM to its process, kill after
// grace) so the watchdog relaunches it. It refuses when the name is not an
// installed role, when start is not running (nothing would relaunch it) and
// when the session is younger than the crash-loop guard's window: a death
// that soon after launch counts toward the guard (SPEC §9.14), and an
// operator must not trip it by restarting twice in a row. It returns the
// stopped session.
func RestartRole(ctx context.Context, l layout.Layout, tc *tmux.Client, role string, grace time.Duration, now time.Time) (tmux.Session, error) {
	names := RoleNames(l)
	if !slices.Contains(names, role) {
		return tmux.Session{}, fmt.Errorf("restart %q: %w (installed: %s)", role, ErrUnknownRole, strings.Join(names, ", "))
	}
	if held, _ := lockfile.Held(l.LeaderLock(layout.RoleStart)); !held {
		return tmux.Session{}, fmt.Errorf("restart %s: start is not running, so nothing would relaunch it: run `start`", role)
	}
	live, err := tc.List(ctx)
	if err != nil {
		return tmux.Session{}, fmt.Errorf("restart %s: list sessions: %w", role, err)
	}
	i := slices.IndexFunc(live, func(s tmux.Session) bool { return s.Name == role })
	if i < 0 {
		return tmux.Session{}, fmt.Errorf("restart %s: no session: the watchdog relaunches it at its next round, unless its crash-loop guard gave up (see logs/system.log)", role)
	}
	s := live[i]
	if age := now.Sub(s.Created); !s.Created.IsZero() && age <= start.DeathCountsWithin {
		return tmux.Session{}, fmt.Errorf("restart %s: launched %s ago; a stop within %s of launch counts toward the crash-loop guard: try again in %s",
			role, age.Round(time.Second), start.DeathCountsWithin, (start.DeathCountsWithin - age + time.Second).Round(time.Second))
	}
	if s.PID > 0 {
		syscall.Kill(s.PID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for start.PIDAlive(s.PID) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // waiting for a real process to exit
		}
	}
	if err := tc.Kill(ctx, role); err != nil && !errors.Is(err, tmux.ErrNoSession) {
		return s, fmt.Errorf("restart %s: kill session: %w", role, err)
	}
	return s, nil
}

// WaitRelaunch waits until role runs in a session other than old (the
// watchdog's relaunch), up to timeout; it returns the new session.
func WaitRelaunch(ctx context.Context, tc *tmux.Client, role string, old tmux.Session, timeout time.Duration) (tmux.Session, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if live, err := tc.List(ctx); err == nil {
			for _, s := range live {
				if s.Name == role && (s.PID != old.PID || s.Created.After(old.Created)) {
					return s, true
				}
			}
		}
		if time.Now().After(deadline) {
			return tmux.Session{}, false
		}
		select {
		case <-ctx.Done():
			return tmux.Session{}, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}
