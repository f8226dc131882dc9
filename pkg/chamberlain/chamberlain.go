// Package chamberlain keeps the kingdom healthy (seed 000, SPEC §4.8): host
// metrics and health in state/resources.json, role heartbeats and the
// dead-role table (hung sessions killed for start to relaunch, a dead
// general's soldiers killed), level-triggered soldier session
// reconciliation, the internal event stream and its anomaly detectors,
// alerts without storms, log rotation, the event log's retention
// (store.TrimEvents) and the verdict of chamberlain --once. It holds the
// kingdom's store in both modes: the queues, the event log and its cursor,
// the pauses and the spend are read and written through it.
//
// Two sub-packages do the rest of the role's work and are driven from its
// Tick: report (stats.json, the daily report, spend and token status) is
// fed every consumed event and issues the report at report.hour; retention
// (seed 002's cleanup, task dirs, base clones, dead writers' temps) runs at
// cleanup.hour and every ten minutes for the temps.
//
// Drive it with role, err := chamberlain.New(l, cfg, deps, ModeDaemon) and
// runner.Run(ctx, opts, role) on monitoring.interval_seconds, or evaluate one read-only report with
// Check (chamberlain --once when a daemon runs).
package chamberlain

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/report"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// Mode says how much a tick may change.
type Mode int

const (
	// ModeDaemon does everything: state, kills, alerts, rotation, cleanup.
	ModeDaemon Mode = iota
	// ModeOnce (chamberlain --once with no daemon running) writes
	// resources.json and, while it gets the cluster lease, consumes
	// internal events, but never kills, restarts, cleans or alerts (SPEC
	// §9.26).
	ModeOnce
	// ModeReadOnly (chamberlain --once beside a daemon) writes nothing.
	ModeReadOnly
)

// Tmux is the part of the tmux client the chamberlain uses.
type Tmux interface {
	List(ctx context.Context) ([]tmux.Session, error)
	Kill(ctx context.Context, name string) error
}

// Config is what the chamberlain reads from the configuration.
type Config struct {
	Chamberlain *config.Chamberlain
	// MaxSoldiers is king.yaml concurrency.max_soldiers (resources.json).
	MaxSoldiers int
	// WatchdogInterval is system.yaml watchdog.interval_seconds: how long
	// start takes to relaunch a missing session.
	WatchdogInterval time.Duration
	// Budget is king.yaml's budget block (SPEC §10.7).
	Budget config.KingBudget
	// SelfFence and Takeover are system.yaml store.self_fence_seconds and
	// store.takeover_seconds: a host silent for Takeover is lost.
	SelfFence, Takeover time.Duration
	// LeaderStall is system.yaml store.leader_stall_seconds: the cluster
	// lease is renewed between ticks (idle is not stalled) unless a tick
	// has run this long, when another host may take the duties over.
	LeaderStall time.Duration
}

// Deps are the chamberlain's connections to the world.
type Deps struct {
	Clock   clock.Clock
	Metrics Metrics
	Tmux    Tmux
	Events  *eventlog.Emitter // nil discards
	Log     *slog.Logger
	// Store is the kingdom's store (required): the queues, the event log,
	// the pauses and the spend. The cluster duties run only while this
	// host holds its "chamberlain-cluster" lease (cluster.go).
	Store store.Store
	// Host is this host's id; it names the host in per-host alerts.
	Host string
}

// Role is the chamberlain's tick.
type Role struct {
	l    layout.Layout
	cfg  Config
	c    *config.Chamberlain
	mode Mode
	clk  clock.Clock
	met  Metrics
	tm   Tmux
	em   *eventlog.Emitter
	log  *slog.Logger

	reg      *sessions.Registry
	messages *queue.Queue
	events   *queue.Queue
	tasks    *queue.Queue
	kv       kv.KV

	st    store.Store
	host  string
	lease store.Lease // the cluster lease while held
	// The lease is renewed every renewEvery on a timer of its own
	// (cluster.go) until stopRenew, except while stalled: the tick now
	// running (ticking) has run for LeaderStall.
	ticking    store.RunClock
	renewEvery time.Duration
	stalled    func() bool
	stopRenew  context.CancelFunc

	// the cluster duties' place in the event log: cur is just past the
	// last event consumed, savedCur what the store holds (consume).
	cur, savedCur store.Cursor
	curLoaded     bool

	loaded  bool
	anomaly AnomalyState
	alerts  AlertState
	state   MonitorState
	stats   report.Stats
	// last encodings written, to skip identical rewrites
	lastAnomaly, lastAlerts, lastState, lastStats []byte

	lastTempSweep time.Time
	lastTokens    time.Time
	tokens        health.Tokens
	tokenErr      error

	// Last is the report of the most recent tick.
	Last *Report
	// latest is Last once its tick has finished (Latest, read by the
	// dashboard's requests while the next tick runs).
	latest atomic.Pointer[Report]
}

// Latest is the report of the latest finished tick (nil before the
// first): safe to read from another goroutine, never changed again.
func (r *Role) Latest() *Report { return r.latest.Load() }

// New builds the chamberlain for layout l; d.Clock, d.Metrics, d.Tmux and
// d.Store are required.
func New(l layout.Layout, cfg Config, d Deps, mode Mode) (*Role, error) {
	if cfg.Chamberlain == nil {
		cfg.Chamberlain = config.DefaultChamberlain()
	}
	if cfg.MaxSoldiers == 0 {
		cfg.MaxSoldiers = config.DefaultKing().Concurrency.MaxSoldiers
	}
	if cfg.WatchdogInterval == 0 {
		cfg.WatchdogInterval = config.DefaultSystem().WatchdogInterval()
	}
	if cfg.SelfFence == 0 {
		cfg.SelfFence = config.DefaultSystem().Store.SelfFence()
	}
	if cfg.Takeover == 0 {
		cfg.Takeover = config.DefaultSystem().Store.Takeover()
	}
	if cfg.LeaderStall == 0 {
		cfg.LeaderStall = config.DefaultSystem().Store.LeaderStall()
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	em := d.Events
	if mode == ModeReadOnly {
		em = nil // a reader emits nothing
	}
	q := func(kind string, em *eventlog.Emitter) *queue.Queue {
		return queue.OnStore(d.Store, l, kind, em, d.Host)
	}
	r := &Role{
		l: l, cfg: cfg, c: cfg.Chamberlain, mode: mode,
		clk: d.Clock, met: d.Metrics, tm: d.Tmux, em: em, log: d.Log,
		reg:      sessions.New(l),
		messages: q(layout.QMessages, em),
		events:   q(layout.QEvents, nil),
		tasks:    q(layout.QTasks, nil),
		kv:       kv.OnStore(d.Store), // the pauses and the spend every host shares
		st:       d.Store,
		host:     d.Host,

		renewEvery: store.RenewEvery,
	}
	r.stalled = func() bool { return r.ticking.Past(r.cfg.LeaderStall) }
	return r, nil
}

func (r *Role) emit(typ string, data any) {
	if err := r.em.Emit(typ, data); err != nil {
		r.log.Warn("emit internal event", "type", typ, "err", err)
	}
}

// load reads the persisted state once. A corrupt state file is logged and
// replaced by a fresh one rather than stopping the chamberlain.
func (r *Role) load(now time.Time) {
	if r.loaded {
		return
	}
	r.loaded = true
	for path, v := range map[string]any{
		r.l.ChamberlainAnomalyState(): &r.anomaly,
		r.l.ChamberlainAlertState():   &r.alerts,
		statePath(r.l):                &r.state,
		r.l.StatsJSON():               &r.stats,
	} {
		if err := loadJSON(path, v); err != nil {
			r.log.Warn("state file unreadable, starting it afresh", "err", err)
		}
	}
	r.anomaly.init()
	r.alerts.init()
	r.state.init(now)
	r.stats.Init()
}

// save persists every state file that changed.
func (r *Role) save() error {
	if r.mode == ModeReadOnly {
		return nil
	}
	return errors.Join(
		saveJSON(r.l.StatsJSON(), &r.stats, &r.lastStats),
		saveJSON(r.l.ChamberlainAnomalyState(), &r.anomaly, &r.lastAnomaly),
		saveJSON(statePath(r.l), &r.state, &r.lastState),
		r.saveAlerts(),
	)
}

// saveAlerts persists the alert state right after alerts were queued (a
// daemon only; --once never alerts). The anomaly state is saved with the
// cursor at the end of the tick, so replayed events are never counted twice.
func (r *Role) saveAlerts() error {
	if r.mode != ModeDaemon {
		return nil
	}
	return saveJSON(r.l.ChamberlainAlertState(), &r.alerts, &r.lastAlerts)
}

// Tick runs one round: observe, decide, act (SPEC §4.8).
func (r *Role) Tick(ctx context.Context) error {
	r.ticking.Begin()
	defer r.ticking.End()
	now := r.clk.Now()
	r.load(now)
	var errs []error
	rep, err := r.observe(ctx, now)
	r.Last = rep
	defer r.latest.Store(rep)
	if err != nil {
		errs = append(errs, err)
	}
	if r.mode == ModeReadOnly {
		return errors.Join(errs...)
	}
	if err := r.writeResources(rep); err != nil {
		errs = append(errs, err)
	}
	r.watcherEvents(rep)
	// The cluster duties (the event log's accounts and alerts, the report,
	// retention of the store) run on one host at a time; on one machine
	// that host is always this one.
	// A store that does not answer leads nothing this tick.
	cluster := rep.StoreErr == nil && r.leadCluster(ctx)
	if cluster {
		if err := r.consume(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.recordDaily(rep.Money)
	if r.mode == ModeDaemon {
		if err := r.act(ctx, rep, now, cluster); err != nil {
			// Alerts and recovery failing must not hide the rest; logged,
			// retried next tick.
			r.log.Error("recovery actions", "err", err)
		}
		if err := r.periodic(ctx, now, cluster); err != nil {
			r.log.Error("periodic jobs", "err", err)
		}
	}
	if err := r.save(); err != nil {
		errs = append(errs, err)
	}
	// The cursor is saved after the state built from its events: a crash in
	// between re-reads them (at-least-once, seed 000).
	if err := r.saveCursor(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close releases the cluster lease.
func (r *Role) Close() error {
	r.stopRenewing()
	if r.lease == nil {
		return nil
	}
	err := r.lease.Release()
	r.lease = nil
	return err
}

func joinErrs(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
