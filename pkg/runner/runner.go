// Package runner drives every long-running role (SPEC §4.2): it takes the
// role's single-leader lock, calls Tick on an interval or as soon as a file
// lands in a watched directory (fsnotify), touches the heartbeat after each
// successful tick, survives failing or panicking ticks, and on shutdown lets
// the current tick finish. Roles implement only Tick.
//
//	err := runner.Run(ctx, runner.Options{Role: "king", Layout: l, Log: log,
//		Watches: []runner.Watch{{Dir: l.QueueState("events", "pending")}}}, kingRole)
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// Role is one tick of a role's level-triggered work.
type Role interface {
	Tick(ctx context.Context) error
}

// Starter is implemented by roles with background work (a socket, soldier
// watchers). Start is called once after the leader lock is taken; its ctx
// ends at shutdown. It must not block.
type Starter interface {
	Start(ctx context.Context) error
}

// Waker is implemented by roles that want an early tick (e.g. a soldier
// finished, a Slack envelope arrived).
type Waker interface {
	Wake() <-chan struct{}
}

// Watch is a directory whose new files wake the runner. Dot-files never
// wake it; Match filters the other base names (nil = all).
type Watch struct {
	Dir   string
	Match func(name string) bool
}

// Options configures Run.
type Options struct {
	Role     string // name of the lock/heartbeat dir under state/
	Layout   layout.Layout
	Interval time.Duration // idle tick period (default 10 s)
	Watches  []Watch
	Debounce time.Duration // least time between a tick's end and a tick a wake-up causes (default 5 ms)
	Once     bool          // run one tick and return
	Standby  bool          // wait for the leader lock instead of exiting
	// MaxFailures consecutive failing ticks make Run return (default 10).
	MaxFailures int
	Log         *slog.Logger
	Events      *eventlog.Emitter
	// OnLeader, if set, runs right after the lock is taken (tests).
	OnLeader func()
}

// ErrTooManyFailures is returned after MaxFailures failing ticks in a row.
var ErrTooManyFailures = errors.New("too many failing ticks in a row")

// Run runs role until ctx ends (or once). It returns nil on a clean shutdown,
// a *lockfile.HeldError when another instance leads, or ErrTooManyFailures.
func Run(ctx context.Context, o Options, role Role) error {
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.Debounce <= 0 {
		o.Debounce = 5 * time.Millisecond
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = 10
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	stateDir := o.Layout.RoleStateDir(o.Role)
	if err := layout.EnsureDir(stateDir); err != nil {
		return err
	}
	lockPath := o.Layout.LeaderLock(o.Role)
	var leader *lockfile.Leader
	var err error
	if o.Standby && !o.Once {
		leader, err = lockfile.TryLeader(lockPath)
		var held *lockfile.HeldError
		if errors.As(err, &held) {
			o.Log.Info("standby: waiting for the leader to exit", "holder_pid", held.PID)
			leader, err = lockfile.WaitLeader(ctx, lockPath, 100*time.Millisecond)
			if err != nil && ctx.Err() != nil {
				return nil
			}
		}
	} else if o.Once {
		// SPEC §9.26: --once tries the lock without blocking.
		leader, err = lockfile.TryLeader(lockPath)
	} else {
		leader, err = tryLeaderBriefly(ctx, lockPath)
	}
	if err != nil {
		return err
	}
	defer leader.Release()
	o.Events.Emit("system.leader_acquired", map[string]any{"role": o.Role, "pid": os.Getpid()})
	if o.OnLeader != nil {
		o.OnLeader()
	}
	sweepOwnTemps(o)

	hb := &beat{}
	if o.Once {
		return runTick(ctx, o, role, hb)
	}
	if s, ok := role.(Starter); ok {
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", o.Role, err)
		}
	}
	o.Log.Info("running", "pid", os.Getpid(), "interval", o.Interval)

	wake := make(chan struct{}, 1)
	notify := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if w, err := watch(ctx, o, notify); err != nil {
		o.Log.Warn("inotify unavailable, polling only", "err", err)
	} else if w != nil {
		defer w.Close()
	}
	var roleWake <-chan struct{}
	if w, ok := role.(Waker); ok {
		roleWake = w.Wake()
	}

	fails := 0
	var lastEnd time.Time     // when the last tick ended
	timer := time.NewTimer(0) // first tick at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			o.Log.Info("shutting down", CatAttr("SYSTEM"))
			return nil
		case <-timer.C:
		case <-wake:
			// Ticks a wake causes are at least Debounce apart (a burst of
			// files coalesces into the next tick), but the first wake after
			// a quiet spell ticks at once: on an idle kingdom each hop of a
			// task (sentinel, king, general, envoy) used to wait the full
			// window.
			if rest := o.Debounce - time.Since(lastEnd); rest > 0 && !sleepCtx(ctx, rest) {
				return nil
			}
		case <-roleWake:
		}
		// The tick runs on a context that survives the shutdown signal, so a
		// SIGTERM lets the current tick finish (SPEC §4.2).
		err := runTick(context.WithoutCancel(ctx), o, role, hb)
		lastEnd = time.Now()
		if err != nil {
			fails++
			o.Log.Error("tick failed", "err", err, "consecutive", fails)
			if fails >= o.MaxFailures {
				return fmt.Errorf("%s: %w (%d): last: %v", o.Role, ErrTooManyFailures, fails, err)
			}
		} else {
			fails = 0
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(o.Interval)
	}
}

// tryLeaderBriefly takes the lock, retrying for up to a second: a status
// probe (start status, chamberlain --once) holds a lock only for moments,
// and a role launched right then must not exit as if another leader ran.
func tryLeaderBriefly(ctx context.Context, path string) (*lockfile.Leader, error) {
	deadline := time.Now().Add(time.Second)
	for {
		l, err := lockfile.TryLeader(path)
		var held *lockfile.HeldError
		if err == nil || !errors.As(err, &held) || time.Now().After(deadline) {
			return l, err
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, err
		}
	}
}

// CatAttr is the slog attribute setting a log line's category.
func CatAttr(cat string) slog.Attr { return slog.String("cat", cat) }

func runTick(ctx context.Context, o Options, role Role, hb *beat) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tick panicked: %v\n%s", r, debug.Stack())
		}
	}()
	if err = role.Tick(ctx); err != nil {
		return err
	}
	// Heartbeat only after a successful tick (SPEC §9.32).
	return hb.touch(o.Layout.Heartbeat(o.Role))
}

// beat touches a role's heartbeat at most once per beatEvery: a role ticks
// on every inotify wake (hundreds a second in a burst) and readers judge a
// heartbeat on a scale of tens of seconds, so one inode update per tick
// was pure cost (issue #17).
type beat struct{ last time.Time }

const beatEvery = time.Second

func (b *beat) touch(path string) error {
	now := time.Now()
	if !b.last.IsZero() && now.Sub(b.last) < beatEvery {
		return nil
	}
	if err := atomicfile.Touch(path); err != nil {
		return err
	}
	b.last = now
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func watch(ctx context.Context, o Options, notify func()) (*fsnotify.Watcher, error) {
	if len(o.Watches) == 0 {
		return nil, nil
	}
	w, err := fsnotify.NewBufferedWatcher(256)
	if err != nil {
		return nil, err
	}
	for _, wd := range o.Watches {
		if err := layout.EnsureDir(wd.Dir); err != nil {
			w.Close()
			return nil, err
		}
		if err := w.Add(wd.Dir); err != nil {
			w.Close()
			return nil, err
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				// A file that arrived (created, renamed in) or was written in
				// place. One that left (fsnotify's Rename is IN_MOVED_FROM: a
				// claim, a dispatch, a delivery moving it on) is no new work:
				// waking on it woke every general at each claim.
				if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) {
					continue
				}
				dir, name := filepath.Dir(ev.Name), filepath.Base(ev.Name)
				if strings.HasPrefix(name, ".") {
					// A dot-temp becomes visible by its rename, which wakes us
					// then; its own writes never should.
					continue
				}
				for _, wd := range o.Watches {
					if filepath.Clean(wd.Dir) == dir && (wd.Match == nil || wd.Match(name)) {
						notify()
					}
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// Overflow or error: a tick rescans everything anyway.
				notify()
			}
		}
	}()
	return w, nil
}

func sweepOwnTemps(o Options) {
	n := 0
	for _, d := range o.Layout.Dirs() {
		m, _ := atomicfile.SweepDeadPidTemps(d, o.Role)
		n += m
	}
	if n > 0 {
		o.Log.Info("removed leftover temp files of dead processes", "count", n, CatAttr("CLEANUP"))
	}
}
