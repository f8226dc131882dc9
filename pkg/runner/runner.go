// Package runner drives every long-running role (SPEC §4.2): it takes the
// role's single-leader lock, calls Tick on an interval or as soon as a file
// lands in a watched directory (fsnotify) or Options.Wakes fires, touches the heartbeat after each
// successful tick, survives failing or panicking ticks, and on shutdown lets
// the current tick finish. Roles implement only Tick.
//
// Leadership comes from the role's lock file (store.kind files), or from
// Options.Lead (store.kind postgres: the store's lease, a session advisory
// lock with an epoch), renewed every store.RenewEvery on a timer of its own
// (store.KeepRenewed, not behind a tick) unless a tick has run for
// Options.LeaderStall, so a standby deposes only a leader that is stalled
// or frozen, never one that is idle between ticks. A role whose lease is
// lost stops at once: its tick and Start contexts end and Run returns
// ErrLeadershipLost, so that start relaunches it in standby.
//
//	err := runner.Run(ctx, runner.Options{Role: "king", Layout: l, Log: log,
//		Watches: []runner.Watch{{Dir: l.QueueState("events", "pending")}}}, kingRole)
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
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

// Leased is implemented by roles that fence their writes with the
// leadership lease (store.Tx.Fence). UseLease is called once the lease is
// taken, before Start; only when Options.Lead is set.
type Leased interface {
	UseLease(store.Lease)
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
	// Lead, if set, takes the role's leadership instead of the lock file
	// (store.kind postgres: st.Lead(ctx, role)). It must not block; an
	// error wrapping store.ErrHeld means another holder leads.
	Lead func(ctx context.Context) (store.Lease, error)
	// LeadRetry is how often a standby asks Lead again (default 1 s): each
	// try may open a database connection.
	LeadRetry time.Duration
	// LeaderStall, if set with Lead, bounds a tick: a leader whose tick has
	// not finished after it gives up its lease (store.leader_stall_seconds,
	// SPEC §12.2) and Run returns ErrLeadershipLost a moment later, even if
	// the tick never returns, so start relaunches the role in standby and
	// another host (or the relaunched process) leads.
	LeaderStall time.Duration
	// RenewEvery is how often the leader renews its lease (Lease.Renew),
	// on a timer of its own, ticks or none (default store.RenewEvery).
	RenewEvery time.Duration
	// Wakes, if set, is one more wake source, debounced like a watched
	// file (store.kind postgres: a notification of the shared store, where
	// no file event fires).
	Wakes <-chan struct{}
}

var (
	// ErrTooManyFailures is returned after MaxFailures failing ticks in a row.
	ErrTooManyFailures = errors.New("too many failing ticks in a row")
	// ErrLeadershipLost is returned when the lease from Options.Lead is
	// lost while the role runs: start relaunches the role in standby.
	ErrLeadershipLost = errors.New("leadership lost")
)

// Run runs role until ctx ends (or once). It returns nil on a clean shutdown,
// a *lockfile.HeldError (or, with Options.Lead, an error wrapping
// store.ErrHeld) when another instance leads, ErrLeadershipLost, or
// ErrTooManyFailures.
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
	if o.RenewEvery <= 0 {
		o.RenewEvery = store.RenewEvery
	}
	stateDir := o.Layout.RoleStateDir(o.Role)
	if err := layout.EnsureDir(stateDir); err != nil {
		return err
	}
	lead, err := acquire(ctx, o)
	if err != nil || lead == nil {
		return err
	}
	defer lead.release()
	if lead.lease != nil {
		o.Events.Emit("system.leader_acquired", map[string]any{"role": o.Role, "pid": os.Getpid(), "epoch": lead.lease.Epoch()})
		o.Log.Info("leader", "epoch", lead.lease.Epoch())
		if r, ok := role.(Leased); ok {
			r.UseLease(lead.lease)
		}
	} else {
		o.Events.Emit("system.leader_acquired", map[string]any{"role": o.Role, "pid": os.Getpid()})
	}
	if o.OnLeader != nil {
		o.OnLeader()
	}
	// Everything the role does as leader ends the moment the lease is lost:
	// runCtx (Start's background work) and tickCtx (the current tick, which
	// otherwise survives a shutdown signal so it can finish).
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	tickCtx, stopTick := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopTick(nil)
	if lost := lead.lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				stopRun(ErrLeadershipLost)
				stopTick(ErrLeadershipLost)
			case <-tickCtx.Done():
			}
		}()
	}
	lostErr := func() error {
		o.Log.Error("leadership lost: stopping", "epoch", lead.lease.Epoch(), CatAttr("SYSTEM"))
		o.Events.Emit("system.leader_lost", map[string]any{"role": o.Role, "pid": os.Getpid(), "epoch": lead.lease.Epoch()})
		return fmt.Errorf("%s epoch %d: %w", o.Role, lead.lease.Epoch(), ErrLeadershipLost)
	}
	sweepOwnTemps(o)

	hb := &beat{}
	if o.Once {
		err := runTick(tickCtx, o, role, hb)
		if errors.Is(context.Cause(tickCtx), ErrLeadershipLost) {
			return lostErr()
		}
		return err
	}
	if s, ok := role.(Starter); ok {
		if err := s.Start(runCtx); err != nil {
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
	if w, err := watch(runCtx, o, notify); err != nil {
		o.Log.Warn("inotify unavailable, polling only", "err", err)
	} else if w != nil {
		defer w.Close()
	}
	var roleWake <-chan struct{}
	if w, ok := role.(Waker); ok {
		roleWake = w.Wake()
	}
	extraWake := o.Wakes
	// Ticks a wake causes are at least Debounce apart (a burst of files
	// coalesces into the next tick), but the first wake after a quiet spell
	// ticks at once: on an idle kingdom each hop of a task (sentinel, king,
	// general, envoy) used to wait the full window. False means runCtx
	// ended meanwhile.
	debounce := func(lastEnd time.Time) bool {
		rest := o.Debounce - time.Since(lastEnd)
		return rest <= 0 || sleepCtx(runCtx, rest)
	}

	// The lease is renewed on its own timer, not after each tick: an idle
	// leader ticks only every Interval (king.yaml intervals, up to an hour)
	// and must not look stalled to a standby between ticks. A tick running
	// past LeaderStall stops the renewals, so a standby may depose it.
	var ticking store.RunClock
	if lead.lease != nil {
		stall := o.LeaderStall
		go store.KeepRenewed(runCtx, lead.lease, o.RenewEvery, func() bool { return ticking.Past(stall) }, o.Log)
	}
	fails := 0
	var out outage
	var lastEnd time.Time     // when the last tick ended
	timer := time.NewTimer(0) // first tick at once
	defer timer.Stop()
	for {
		select {
		case <-runCtx.Done():
			if errors.Is(context.Cause(runCtx), ErrLeadershipLost) {
				return lostErr()
			}
			o.Log.Info("shutting down", CatAttr("SYSTEM"))
			return nil
		case <-timer.C:
		case <-wake:
			if !debounce(lastEnd) {
				continue // shutdown or lost leadership: the select above says which
			}
		case _, ok := <-extraWake:
			if !ok {
				extraWake = nil // its source ended: the interval still polls
				continue
			}
			if !debounce(lastEnd) {
				continue
			}
		case <-roleWake:
		}
		// The tick runs on a context that survives the shutdown signal, so a
		// SIGTERM lets the current tick finish (SPEC §4.2).
		ticking.Begin()
		err := watchedTick(tickCtx, o, role, hb, lead, func() {
			stopRun(ErrLeadershipLost)
			stopTick(ErrLeadershipLost)
		})
		ticking.End()
		lastEnd = time.Now()
		if errors.Is(context.Cause(tickCtx), ErrLeadershipLost) {
			return lostErr()
		}
		next := o.Interval
		switch {
		case err != nil && store.Unreachable(err):
			// Weather, not a fault (SPEC §12.2): never counted, retried
			// with backoff; a store that comes back wakes the role
			// (Options.Wakes) before the backoff ends.
			next = out.fail(o, err)
			// The loop is alive and waiting, not hung: the heartbeat
			// says so, and the outage record says why no work moves.
			if herr := hb.touch(o.Layout.Heartbeat(o.Role)); herr != nil {
				o.Log.Warn("heartbeat", "err", herr)
			}
		case err != nil:
			fails++
			o.Log.Error("tick failed", "err", err, "consecutive", fails)
			if fails >= o.MaxFailures {
				return fmt.Errorf("%s: %w (%d): last: %v", o.Role, ErrTooManyFailures, fails, err)
			}
		default:
			fails = 0
			out.ok(o)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// leadership is what Run holds while the role leads: the lock file, or a
// lease from Options.Lead.
type leadership struct {
	file  *lockfile.Leader
	lease store.Lease
}

func (l *leadership) release() {
	if l.lease != nil {
		l.lease.Release()
		return
	}
	l.file.Release()
}

// lost is closed when the lease is lost (nil for the lock file, which
// lasts as long as the process).
func (l *leadership) lost() <-chan struct{} {
	if l.lease == nil {
		return nil
	}
	return l.lease.Lost()
}

// acquire takes the role's leadership as o asks. A nil leadership with a
// nil error means ctx ended while standing by.
func acquire(ctx context.Context, o Options) (*leadership, error) {
	if o.Lead != nil {
		lease, err := acquireLease(ctx, o)
		if err != nil || lease == nil {
			return nil, err
		}
		return &leadership{lease: lease}, nil
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
				return nil, nil
			}
		}
	} else if o.Once {
		// SPEC §9.26: --once tries the lock without blocking.
		leader, err = lockfile.TryLeader(lockPath)
	} else {
		leader, err = tryLeaderBriefly(ctx, lockPath)
	}
	if err != nil {
		return nil, err
	}
	return &leadership{file: leader}, nil
}

// acquireLease asks o.Lead: once (--once), until ctx ends (standby: a
// database outage is waited out too, logged when the reason changes), or
// for about a second (a leader that is just releasing).
func acquireLease(ctx context.Context, o Options) (store.Lease, error) {
	every := o.LeadRetry
	if every <= 0 {
		every = time.Second
	}
	deadline := time.Now().Add(time.Second)
	last := ""
	for {
		lease, err := o.Lead(ctx)
		if err == nil {
			return lease, nil
		}
		if ctx.Err() != nil {
			if o.Standby {
				return nil, nil
			}
			return nil, err
		}
		switch {
		case o.Once:
			return nil, err
		case o.Standby:
			if msg := err.Error(); msg != last {
				last = msg
				if errors.Is(err, store.ErrHeld) {
					o.Log.Info("standby: another instance leads; waiting", "err", err)
				} else {
					o.Log.Warn("standby: cannot ask for the leadership; retrying", "err", err)
				}
			}
		case !errors.Is(err, store.ErrHeld) || time.Now().After(deadline):
			return nil, err
		}
		if !sleepCtx(ctx, every) {
			if o.Standby {
				return nil, nil
			}
			return nil, err
		}
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
// would be cost without a reader.
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
	dirs := o.Layout.TempDirs()
	for _, d := range dirs {
		m, _ := atomicfile.SweepDeadPidTemps(d, o.Role)
		n += m
	}
	if n > 0 {
		o.Log.Info("removed leftover temp files of dead processes", "count", n, CatAttr("CLEANUP"))
	}
}

// outage is a run of ticks that could not reach the store.
type outage struct {
	since time.Time // zero: the store answers
	tries int
}

// maxBackoff caps the wait between ticks while the store is unreachable.
const maxBackoff = 30 * time.Second

// fail records one more unreachable tick and returns how long to wait
// before the next: 1 s doubling to 30 s. The first failure of an outage
// is logged and written to layout.StoreUnreachable for the verdict.
func (u *outage) fail(o Options, err error) time.Duration {
	if u.since.IsZero() {
		u.since = time.Now()
		o.Log.Error("store unreachable; waiting for it (not a failure of this role)", "err", err, CatAttr("SYSTEM"))
		rec := map[string]string{"since": u.since.UTC().Format(time.RFC3339), "error": redact.String(err.Error())}
		if b, jerr := json.Marshal(rec); jerr == nil {
			if werr := atomicfile.WriteFile(o.Layout.StoreUnreachable(o.Role), append(b, '\n'), 0o600); werr != nil {
				o.Log.Warn("record store outage", "err", werr)
			}
		}
	}
	d := time.Second << min(u.tries, 5)
	u.tries++
	return min(d, maxBackoff)
}

// ok ends an outage: logged, and its record removed.
func (u *outage) ok(o Options) {
	if u.since.IsZero() {
		return
	}
	o.Log.Info("store reachable again", "after", time.Since(u.since).Round(time.Second).String(), CatAttr("SYSTEM"))
	if err := os.Remove(o.Layout.StoreUnreachable(o.Role)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		o.Log.Warn("remove store outage record", "err", err)
	}
	*u = outage{}
}

// watchedTick is runTick under Options.LeaderStall for a leader with a
// lease: past the stall it calls lose (ending the tick's context), gives
// the lease up, and returns after a short grace whether or not the tick
// has.
func watchedTick(ctx context.Context, o Options, role Role, hb *beat, lead *leadership, lose func()) error {
	if lead.lease == nil || o.LeaderStall <= 0 {
		return runTick(ctx, o, role, hb)
	}
	done := make(chan error, 1)
	go func() { done <- runTick(ctx, o, role, hb) }()
	stall := time.NewTimer(o.LeaderStall)
	defer stall.Stop()
	select {
	case err := <-done:
		return err
	case <-stall.C:
	}
	o.Log.Error("tick has not finished: giving up the lead", "after", o.LeaderStall.String(), CatAttr("SYSTEM"))
	lose()
	if err := lead.lease.Release(); err != nil {
		o.Log.Warn("release the lease", "err", err)
	}
	grace := time.NewTimer(stallGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		return fmt.Errorf("tick stalled for %s", o.LeaderStall)
	}
}

// stallGrace is how long a stalled tick may take to notice its context
// ended before Run returns without it.
const stallGrace = 5 * time.Second
