// Package king is the router of Kingdom (SPEC §4.4). It owns the events queue
// (its single consumer), creates tasks for generals, turns final results into
// Slack messages, retries, resumes, schedules and petitions.
//
// Drive it with the shared runner:
//
//	k, err := king.New(king.Options{Layout: l, Store: st, Host: host, Config: cfg, Log: log, Events: em})
//	runner.Run(ctx, runner.Options{Role: "king", Watches: king.Watches(l), ...}, k)
//
// Every Tick is level-triggered: it re-reads pending events, petition
// results, in-progress tasks with final results and due schedules, and moves
// each toward its next state. Every file a step writes has a deterministic
// name and the rename that marks the input done comes last, so a king killed
// at any instant and restarted leaves no duplicate and loses nothing.
//
// The queues and the small state live in the store (Options.Store: the
// files under Layout, or the database every host shares); every leader
// write is one store transaction fenced by the king's lease, and
// cluster.go holds the duties that only matter with more than one host
// (host loss, a resume's host), which on the files store find nothing to
// do.
//
// breaker.go is the king's part of the brakes (SPEC §12.4, king.yaml
// breaker): the per-item attempt cap and the parks of a general whose
// failures look alike, kept in the store (pkg/parks) and lifted by a
// passing canary, an item's window or `start unpark`.
package king

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Options configures a King.
type Options struct {
	Layout layout.Layout
	// Store holds the queues, the small state and the event log (SPEC
	// §12.1); required.
	Store store.Store
	// Host is this host's id (config.Store.ResolveHostID).
	Host string
	// Takeover is store.takeover_seconds: the king fails the tasks of a
	// host silent this long (HostLost). 0: 600 s.
	Takeover time.Duration
	Config   *config.King // nil: defaults
	Log      *slog.Logger
	Events   *eventlog.Emitter
	Clock    clock.Clock // nil: wall clock
	// Location is the zone of task-id dates and cron schedules (SPEC §9.22:
	// host local time). nil: time.Local.
	Location *time.Location
	// PetitionCommand is the argv prefix that runs the petition classifier;
	// the king appends `petition --base-dir B --event ID --prompt F --out O
	// --timeout-seconds N`. nil: <bindir>/soldier-spawn (BinDir).
	PetitionCommand []string
	// Jitter spreads a retry delay; nil adds up to 10% at random. Tests pass
	// an identity function.
	Jitter func(time.Duration) time.Duration
	// DiskMinFreeGB holds admission below this much free space
	// (chamberlain.yaml thresholds.disk_min_free_gb; 0: no hold, hold.go).
	DiskMinFreeGB float64
}

// King is the router role. Create it with New; it is not safe for
// concurrent Ticks (the runner calls Tick from one goroutine).
type King struct {
	l      layout.Layout
	kv     kv.KV
	cfg    *config.King
	log    *slog.Logger
	em     *eventlog.Emitter
	clk    clock.Clock
	loc    *time.Location
	jitter func(time.Duration) time.Duration
	// tctx is the running Tick's context, bounded by tickTimeout (ctx);
	// nil between ticks.
	tctx context.Context

	st       store.Store
	host     string
	lease    store.Lease // the king's leadership (UseLease); nil until the runner leads
	takeover time.Duration

	events *queue.Queue
	tasks  *queue.Queue
	msgs   *queue.Queue
	seq    taskSeq // state/king/task-seq (seq.go)

	routes  *Router
	mfSig   string // the manifests the routes were built from (routing.go)
	started bool   // startup recovery done

	petitionCmd []string
	petMu       sync.Mutex
	petExited   map[string]bool // classifier exited (any outcome)
	wake        chan struct{}

	orphanSince map[string]time.Time // task → first seen without its general (orphans.go)
	disk        diskHold             // the low-disk hold and its alert (hold.go)
	sys         *config.System       // system.yaml (engines, usage-limit fallback), loaded once (budget.go)
	held        waitBook             // what waits and why (waits.go)
	brk         breaker              // the parks (breaker.go)
}

// New builds a King. It loads the manifests once; later ticks reload them
// when a file in config/generals changes.
func New(o Options) (*King, error) {
	if o.Config == nil {
		o.Config = config.DefaultKing()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Jitter == nil {
		o.Jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return d
			}
			return d + time.Duration(rand.Int64N(int64(d)/10+1))
		}
	}
	newQueue := func(kind string) *queue.Queue {
		return queue.OnStore(o.Store, o.Layout, kind, o.Events, o.Host)
	}
	k := &King{
		l: o.Layout, cfg: o.Config, log: o.Log, em: o.Events, clk: o.Clock, loc: o.Location,
		jitter:      o.Jitter,
		st:          o.Store,
		host:        o.Host,
		events:      newQueue(layout.QEvents),
		tasks:       newQueue(layout.QTasks),
		msgs:        newQueue(layout.QMessages),
		petitionCmd: o.PetitionCommand,
		petExited:   map[string]bool{},
		orphanSince: map[string]time.Time{},
		wake:        make(chan struct{}, 1),
		brk:         breaker{parks: map[string]*parks.Park{}, claimed: map[string]bool{}},
	}
	k.disk = diskHold{minFreeGB: o.DiskMinFreeGB, freeBytes: statfsFree}
	// The king's small state (pause, cancel records, control replies,
	// engine pauses, spend, final results) is written fenced by its lease;
	// the task sequence guards itself (seq.go) and is handed back at Close,
	// after the lease.
	k.kv = kv.Fenced(k.st, func() store.Lease { return k.lease })
	k.seq = taskSeq{kv: kv.OnStore(o.Store)}
	k.initCluster(o)
	if len(k.petitionCmd) == 0 {
		k.petitionCmd = []string{filepath.Join(BinDir(o.Layout), "soldier-spawn")}
	}
	for _, d := range []string{o.Layout.RoleStateDir(layout.RoleKing), o.Layout.PetitionResultsDir(), o.Layout.PetitionPromptsDir(),
		o.Layout.KingControlDir()} {
		if err := layout.EnsureDir(d); err != nil {
			return nil, err
		}
	}
	k.routes = NewRouter(nil)
	k.reloadManifests()
	return k, nil
}

// tickTimeout bounds one Tick's store calls as a whole: a store that stops
// answering fails the tick's remaining steps instead of hanging the king
// (the runner retries with backoff).
const tickTimeout = 2 * time.Minute

// ctx is the context of the king's store calls: the running Tick's.
// Outside a Tick (Close, a test driving one step) there is no caller's
// context, and each call is bounded by tickTimeout on its own.
func (k *King) ctx() context.Context {
	if k.tctx != nil {
		return k.tctx
	}
	ctx, cancel := context.WithTimeout(context.Background(), tickTimeout)
	_ = cancel // released at its deadline; the call it bounds is short
	return ctx
}

// BinDir is where sibling binaries live: $KINGDOM_BIN_DIR, else the
// directory of this executable, else $BASE_DIR/bin.
func BinDir(l layout.Layout) string {
	if d := os.Getenv("KINGDOM_BIN_DIR"); d != "" {
		return d
	}
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return l.Bin()
}

// Watches are the directories whose new files wake the king early (SPEC
// §9.25): pending events, final results (<task>.json only, never heartbeats
// or raw/staging/checkpoint files) and petition results.
func Watches(l layout.Layout) []runner.Watch {
	return []runner.Watch{
		{Dir: l.QueueState(layout.QEvents, layout.Pending), Match: isJSON},
		{Dir: l.ResultsDir(), Match: IsFinalResultName},
		{Dir: l.PetitionResultsDir(), Match: isJSON},
		{Dir: l.KingControlDir(), Match: isJSON},
	}
}

func isJSON(name string) bool {
	return !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".json")
}

// IsFinalResultName reports whether a state/results file name is a final
// result `task-….json` (not -raw, -result or -checkpoint).
func IsFinalResultName(name string) bool {
	id, ok := strings.CutSuffix(name, ".json")
	if !ok || !strings.HasPrefix(id, "task-") {
		return false
	}
	for _, s := range []string{"-raw", "-result", "-checkpoint"} {
		if strings.HasSuffix(id, s) {
			return false
		}
	}
	return true
}

// Wake is signalled when a petition classifier exits, so its answer (or
// its absence) is handled at once.
func (k *King) Wake() <-chan struct{} { return k.wake }

func (k *King) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Tick runs one round (SPEC §4.4): recovery at startup and after a failed
// tick, then (1) task results (first, so the slots they free are used at
// once), (2) pending events, (3) petitions, (4) schedules. Each step runs even
// when an earlier one failed; the errors are joined.
func (k *King) Tick(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, tickTimeout)
	defer cancel()
	k.tctx = ctx
	defer func() { k.tctx = nil }()
	k.reloadManifests()
	var errs []error
	if !k.started {
		if err := k.recover(); err != nil {
			errs = append(errs, fmt.Errorf("recover dispatched events: %w", err))
		} else {
			k.started = true
		}
	}
	// The parks hold this tick's dispatches (breaker.go).
	if err := k.loadParks(); err != nil {
		errs = append(errs, fmt.Errorf("parks: %w", err))
	}
	// Operator requests first, so a pause answered in this tick already
	// holds this tick's admissions (control.go).
	if err := k.processControl(); err != nil {
		errs = append(errs, fmt.Errorf("control: %w", err))
	}
	// Results first: a slot a result frees admits the next event in this
	// same tick, as admission counts the tasks in flight after it.
	if err := k.processResults(); err != nil {
		errs = append(errs, fmt.Errorf("results: %w", err))
	}
	// The canaries those results judged, the parks' alerts and the items
	// whose window ended (breaker.go).
	if err := k.processParks(); err != nil {
		errs = append(errs, fmt.Errorf("parks: %w", err))
	}
	// The tasks of a lost host run again (cluster.go).
	if err := k.processHostLoss(); err != nil {
		errs = append(errs, fmt.Errorf("host loss: %w", err))
	}
	adm := k.admission()
	steps := []struct {
		name string
		fn   func(*admission) error
	}{
		{"pending events", k.processPending},
		{"petitions", k.processPetitions},
		{"schedules", k.processSchedules},
		{"orphaned tasks", k.processOrphans},
		{"task waits", k.taskWaits},
	}
	for _, s := range steps {
		if err := s.fn(adm); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	k.flushWaits()
	if len(errs) > 0 {
		// A step that failed half-way (a full disk between writing a
		// dispatched event and its task) is repaired the way a restart
		// would: run the recovery again next tick.
		k.started = false
	}
	return errors.Join(errs...)
}

func (k *King) now() time.Time { return k.clk.Now() }

// Close ends a king whose runner returned: the task ids it reserved and did
// not use go back to the sequence (seq.go), so a clean restart continues
// the numbering without a gap.
func (k *King) Close() error { return k.seq.release(k.ctx()) }
