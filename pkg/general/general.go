// Package general is a general's runtime (SPEC §4.5): each Tick claims the
// tasks addressed to this general from queue/tasks/pending/ (priority, then
// age, skipping a future not_before) and starts one goroutine per task, up to
// the manifest's max_concurrent counted across every host, and only while
// this host's own health admits the task (claim.go). A task goroutine
// prepares the workspace (§9.9), renders the prompt, spawns a soldier in tmux
// (pkg/soldier), watches it (result, death, timeout with heartbeat
// extension, and the brakes of king.yaml breaker: no progress is Stalled,
// burn is Runaway; brakes.go) and writes the final result. The runner's
// loop keeps ticking meanwhile, so the heartbeat stays fresh during long
// soldiers. The general never moves a
// task out of in_progress/ (§9.4; the king does), but to give back at once a
// claim beyond the cap.
//
// The tasks are the store's (Options.Store, files or PostgreSQL alike,
// SPEC §12.1): a claim names this host and the attempt, only that holder's
// final result is accepted, a task pinned to another host (Task.Host) is
// left to it, and a host whose lease went stale fences itself (cluster.go).
// Each tick also carries out the operator's cancels of this general's
// running attempts: the king only records them; the general that owns the
// soldier kills it (cancel.go).
//
// The agent holds no keys (SPEC §12.3). For a pull request the general
// prepares what the agent would have fetched: the worktree is the PR's
// head with the base branch fetched beside it, the instruction files
// (CLAUDE.md, AGENTS.md, .claude/, .codex/, .mcp.json) are the base
// branch's, and the PR's title, body, changed files and comments are in
// the task file and the prompt, fenced as untrusted text
// (pullrequest.go). What the agent wants done outside its worktree it
// asks for as outputs in its result; after a successful soldier the
// general carries them out once with the write token, within the
// manifest's outputs caps and while it holds the claim, and puts each
// outcome into the final result (outputs.go, push.go, pkg/outputs).
//
//	g, err := general.New(general.Options{Layout: l, Manifest: m, System: sys, Tmux: tc, Store: st, Host: host, ...})
//	runner.Run(ctx, runner.Options{Role: m.Name, Watches: g.Watches(), ...}, g)
package general

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/outputs"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// Options are a general's dependencies.
type Options struct {
	Layout   layout.Layout
	Manifest *config.Manifest
	System   *config.System // nil: defaults
	Log      *slog.Logger
	Events   *eventlog.Emitter
	Tmux     *tmux.Client
	Clock    clock.Clock
	// SpawnBin is the soldier-spawn executable ("" = spawn.FindBinary).
	SpawnBin string
	// PollInterval is how often a soldier watcher looks at its session and
	// result (default 1 s).
	PollInterval time.Duration
	// SessionEnv is added to every soldier session's environment.
	SessionEnv map[string]string
	// Trace, if set, is called at milestones (benchmarks): "claimed",
	// "running" (soldier session created), "raw" (raw result seen), "final".
	Trace func(taskID, milestone string)
	// Store holds the tasks and the small state (pauses, cancel records,
	// final results); required.
	Store store.Store
	// Host is this host's id (config.Store.ResolveHostID): the holder of
	// its claims.
	Host string
	// HostMaxSoldiers is king.yaml concurrency.host_max_soldiers: no claim
	// while this host runs that many soldiers (0 = no cap).
	HostMaxSoldiers int
	// Breaker is king.yaml breaker: the no-progress and burn brakes of
	// every attempt (brakes.go); its zero value brakes nothing.
	Breaker config.KingBreaker
	// Services are the GitHub and Jira the general reads a pull request
	// from and carries the agent's outputs out on, with the write token
	// (SPEC §12.3); nil: outputs.Load (the sentinel's sentinel.yaml and
	// the tokens of kingdom.env, read from the environment).
	Services *outputs.Services
}

// General is one general's runtime; it implements runner.Role, Starter and
// Waker.
type General struct {
	o      Options
	name   string
	tasks  *queue.Queue
	reg    *sessions.Registry
	log    *slog.Logger
	wake   chan struct{}
	baseMu sync.Mutex
	base   context.Context // Start's; nil before (a --once tick's is used)

	kv       kv.KV
	services outputs.Services
	// fenced: this host's lease is stale (cluster.go); fenceMu serialises
	// selfFence (Start's timer and Tick both run it).
	fenceMu sync.Mutex
	fenced  bool

	mu sync.Mutex
	// admits is what this host's health admitted at the last claim
	// ("" before the first; claim.go).
	admits string
	// active holds the attempt each running task goroutine works on.
	active        map[string]*doc.Task
	wg            sync.WaitGroup
	reconciled    bool
	lastReconcile time.Time
	raw           rawWatch
	// stranded and pendingRaw are results a full disk kept from being
	// written (stranded.go); writesFailing is set while any is.
	stranded      map[string]stranded
	pendingRaw    map[string]doc.RawResult
	writesFailing bool
}

// New returns the general described by o.Manifest.
func New(o Options) (*General, error) {
	if o.Manifest == nil {
		return nil, errors.New("general: no manifest")
	}
	if o.System == nil {
		o.System = config.DefaultSystem()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Tmux == nil {
		o.Tmux = tmux.New()
	}
	if o.SpawnBin == "" {
		o.SpawnBin = spawn.FindBinary(o.Layout)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Services == nil {
		svc := outputs.Load(o.Layout, os.Getenv)
		o.Services = &svc
	}
	return &General{services: *o.Services,
		o: o, name: o.Manifest.Name,
		tasks:    queue.OnStore(o.Store, o.Layout, layout.QTasks, o.Events, o.Host),
		kv:       kv.OnStore(o.Store),
		reg:      sessions.New(o.Layout),
		log:      o.Log,
		wake:     make(chan struct{}, 1),
		active:   map[string]*doc.Task{},
		stranded: map[string]stranded{}, pendingRaw: map[string]doc.RawResult{},
	}, nil
}

// Watches are the directories whose new files should wake the runner: a
// pending task, an operator's cancel (on files; the store's notifications
// wake a general in PostgreSQL mode, app.Env).
func (g *General) Watches() []runner.Watch {
	return []runner.Watch{{Dir: g.o.Layout.QueueState(layout.QTasks, layout.Pending)}, {Dir: g.o.Layout.KingCancelledDir()}}
}

// Start records the shutdown context for soldier watchers and starts the
// self-fence's own timer (SPEC §12.2: a tick held up in a store call must
// not hold up the fence).
func (g *General) Start(ctx context.Context) error {
	g.baseMu.Lock()
	g.base = ctx
	g.baseMu.Unlock()
	go func() {
		tick := time.NewTicker(fenceCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				g.selfFence(ctx)
			}
		}
	}()
	return nil
}

// fenceCheckEvery is how often Start's timer looks at the host lease (a
// stat; self_fence_seconds is at least 10).
const fenceCheckEvery = time.Second

// baseCtx is the context of task goroutines: Start's, or without a Start
// (a --once run) the tick's.
func (g *General) baseCtx(tick context.Context) context.Context {
	g.baseMu.Lock()
	defer g.baseMu.Unlock()
	if g.base == nil {
		return tick
	}
	return g.base
}

// callCtx bounds one store call made for ctx (store.call_timeout_seconds).
func (g *General) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.o.System.Store.CallTimeout())
}

// Wake fires when a soldier finished (a slot is free).
func (g *General) Wake() <-chan struct{} { return g.wake }

func (g *General) notify() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *General) trace(task, m string) {
	if g.o.Trace != nil {
		g.o.Trace(task, m)
	}
}

func (g *General) emit(typ string, data map[string]any) {
	if g.o.Events != nil {
		_ = g.o.Events.EmitAs(typ, g.name, data)
	}
}

// Tick reconciles once after start (§9.4), then claims tasks while slots
// are free.
func (g *General) Tick(ctx context.Context) error {
	// First, before any store call of the tick (and on Start's timer
	// meanwhile): a host whose lease went stale stops its soldiers.
	fenced := g.selfFence(ctx)
	now := g.o.Clock.Now()
	if !g.reconciled || now.Sub(g.lastReconcile) >= reconcileEvery {
		// At start (§9.4), and again now and then as a safety net; a task
		// this general could not finish for a full disk is retried every
		// tick (retryStranded).
		if err := g.reconcile(ctx); err != nil {
			return err
		}
		g.reconciled, g.lastReconcile = true, now
	}
	g.retryStranded(ctx)
	g.enforceCancels(ctx)
	if fenced {
		return nil // no lease, no claim: the king hands the tasks elsewhere
	}
	return g.claim(ctx)
}

// reconcileEvery is how often a running general re-runs its §9.4 pass.
const reconcileEvery = 5 * time.Minute

// busy reports whether a goroutine of this general works on (or a full
// disk holds) an attempt of task id.
func (g *General) busy(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, stuck := g.stranded[id]
	return g.active[id] != nil || stuck
}

func (g *General) slots() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.o.Manifest.MaxConcurrent - len(g.active)
}

func (g *General) claim(ctx context.Context) error {
	if g.slots() <= 0 || g.paused(ctx) {
		return nil // paused by the operator: no new soldier (SPEC §10.11)
	}
	snap := g.hostHealth()
	if !hostAdmits(snap, doc.PriorityHigh) {
		return nil // this host admits nothing (SPEC §12.2)
	}
	// Every tick lists the whole of pending/ (level-triggered, no memory of
	// earlier ticks); tasks addressed elsewhere are skipped below.
	entries, err := g.tasks.List(layout.Pending)
	if err != nil {
		return err
	}
	now := g.o.Clock.Now()
	if len(entries) == 0 || g.enginePaused(ctx, now) {
		return nil
	}
	park, err := parks.GeneralPark(ctx, g.kv, g.name)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if g.slots() <= 0 {
			return nil
		}
		var head struct {
			TargetGeneral string `json:"target_general"`
			Host          string `json:"host"`
		}
		if e.Decode(&head) != nil || head.TargetGeneral != g.name {
			continue
		}
		if head.Host != "" && head.Host != g.o.Host {
			continue // affinity: a resume runs where its question was asked
		}
		if g.leaseStale() {
			return nil // fenced in the middle of the tick: no store write more
		}
		t, err := schema.DecodeTask(e.Data)
		if err != nil {
			// Addressed to us but malformed: never let it block the queue.
			_ = g.tasks.Reject(layout.Pending, e.ID, err.Error())
			continue
		}
		if t.ID != e.ID {
			_ = g.tasks.Reject(layout.Pending, e.ID, fmt.Sprintf("task id %q does not match the file name", t.ID))
			continue
		}
		if t.NotBefore != "" {
			if nb, err := doc.ParseTime(t.NotBefore); err == nil && nb.After(now) {
				continue
			}
		}
		if park != nil && park.Canary != t.ID {
			// Parked by the king's breaker (SPEC §12.4): only its canary
			// runs; the rest (a retry scheduled before or during the
			// park, a task dispatched just before it) waits for the lift.
			continue
		}
		if !hostAdmits(snap, t.Priority) {
			continue
		}
		if g.busy(t.ID) {
			// An earlier attempt of this task still ends here (a lost one
			// cleans up its files and workspace, which are the task's, not
			// the attempt's): the new attempt waits for it.
			continue
		}
		if g.hostFull() {
			return nil
		}
		if err := g.claimTask(ctx, t); err != nil {
			if errors.Is(err, errAtCap) {
				return nil
			}
			if errors.Is(err, queue.ErrTaken) || errors.Is(err, queue.ErrExists) {
				continue
			}
			return err
		}
		g.trace(t.ID, "claimed")
		g.emit("task.started", map[string]any{"task_id": t.ID, "general": g.name, "retry_count": t.RetryCount, "type": t.Type})
		g.log.Info("task started", "task", t.ID, "type", t.Type, "attempt", t.RetryCount)
		// The claim is the state change: the task's directory (or row
		// state) says in_progress, and its file is not rewritten to say it
		// again (`start tasks` shows the directory's word).
		t.Status = doc.TaskInProgress
		g.start(ctx, t, func(ctx context.Context) { g.runTask(ctx, t) })
	}
	return nil
}

// paused reports whether the operator paused the kingdom.
func (g *General) paused(ctx context.Context) bool {
	ctx, cancel := g.callCtx(ctx)
	defer cancel()
	return control.Paused(ctx, g.kv)
}

// claimOf is the claim this host holds on an attempt of t: only it may
// have its final result accepted.
func (g *General) claimOf(t *doc.Task) store.Claim {
	return store.Claim{Holder: g.o.Host, Attempt: t.RetryCount}
}

// hostFull reports whether this host already runs host_max_soldiers
// soldiers: the other generals' registered soldiers and this general's
// running tasks (a claimed task registers its soldier only after its
// workspace is ready).
func (g *General) hostFull() bool {
	max := g.o.HostMaxSoldiers
	if max <= 0 {
		return false
	}
	regs, err := g.reg.List()
	if err != nil {
		g.log.Warn("read sessions registry", "err", err)
	}
	n := 0
	for _, r := range regs {
		if r.General != g.name {
			n++
		}
	}
	g.mu.Lock()
	n += len(g.active)
	g.mu.Unlock()
	return n >= max
}

// start runs fn for task t in its own goroutine, holding a slot; tick is
// the context of the tick that starts it.
func (g *General) start(tick context.Context, t *doc.Task, fn func(ctx context.Context)) {
	ctx := g.baseCtx(tick)
	g.mu.Lock()
	g.active[t.ID] = t
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				g.log.Error("task goroutine panicked", "task", t.ID, "panic", fmt.Sprint(r))
			}
			g.mu.Lock()
			delete(g.active, t.ID)
			g.mu.Unlock()
			g.notify()
		}()
		fn(ctx)
	}()
}
