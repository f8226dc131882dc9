// Package sentinel is the role that turns the outside world into events
// (SPEC §4.3): GitHub notifications, Jira tickets and files dropped into
// inbox/. Each watcher (package watcher's contract: fetch → parse → emit →
// post_emit) runs on its own interval; emitting goes through the one
// admission door, queue.Admitter (SPEC §9.19), which refuses ids already in
// any events state or in state/sentinel/seen/ and writes the seen marker.
// One watcher's failure is logged and never stops another; each fetch's
// outcome is recorded in state/sentinel/watchers.json (pkg/watchstatus),
// from which the chamberlain alerts on a watcher failing poll after poll.
//
// Events are admitted through the store (Options.Store), whose seen index
// is every host's when several share one database; each host runs a
// sentinel for its own inbox, and the GitHub and Jira pollers run only on
// the host holding PollersLease (lead.go).
//
// Drive it with the shared runner:
//
//	s, err := sentinel.New(cfg, sentinel.Options{Layout: l, Log: log, Events: em, Clock: clk, Store: st, Host: host})
//	opts.Interval, opts.Watches = s.RunnerInterval(), s.Watches()
//	runner.Run(ctx, opts, s)
package sentinel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/github"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/inbox"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/jira"
	"github.com/kingdom-dev/kingdom/pkg/sentinel/watcher"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/watchstatus"
)

// MaxRunnerInterval caps the runner's idle period (SPEC §4.2: tick at least
// every 10 s).
const MaxRunnerInterval = 10 * time.Second

// Options are the sentinel's surroundings.
type Options struct {
	Layout layout.Layout
	Log    *slog.Logger
	Events *eventlog.Emitter
	Clock  clock.Clock
	// Getenv reads secrets and JIRA_URL (default os.Getenv).
	Getenv func(string) string
	// HTTPClient is the base client of the HTTP watchers (default a fresh
	// one; the configured timeouts are always applied).
	HTTPClient *http.Client
	// Store is where events are admitted (required): its seen index is
	// every host's, and the GitHub and Jira pollers run only while this
	// host holds its PollersLease.
	Store store.Store
	// Host is this host's id.
	Host string
	// LeaderStall is system.yaml store.leader_stall_seconds (default
	// 120 s): the pollers' lease is renewed between ticks unless a tick
	// has run this long, when another host may take the polling over.
	LeaderStall time.Duration
}

type scheduled struct {
	w    watcher.Watcher
	next time.Time
}

// Sentinel is the role.
type Sentinel struct {
	o        Options
	admit    *queue.Admitter
	pollers  *pollers
	watchers []*scheduled
	inbox    *inbox.Watcher
	// status is state/sentinel/watchers.json, loaded once at start and
	// saved when a poll changes it (the chamberlain alerts from it).
	status      watchstatus.File
	statusDirty bool

	wakeCh chan struct{}
	mu     sync.Mutex
	timer  *time.Timer
}

// New builds the enabled watchers of cfg.
func New(cfg *config.Sentinel, o Options) (*Sentinel, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	l := o.Layout
	s := newSentinel(o)
	p := cfg.Polling
	if g := p.GitHub; g != nil {
		token := o.Getenv("GH_TOKEN")
		if token == "" {
			token = o.Getenv("GITHUB_TOKEN")
		}
		if token == "" {
			o.Log.Warn("github watcher: neither GH_TOKEN nor GITHUB_TOKEN is set; requests go unauthenticated")
		}
		w, err := github.New(github.Config{
			APIURL: g.APIURL, Interval: g.Interval(), Timeout: g.Timeout(),
			Filter: github.Filter{Repos: g.Scope.Repos, Reasons: g.Scope.FilterReasons},
			Token:  token, StatePath: l.SentinelGitHubState(), Clock: o.Clock,
			Log: o.Log.With("watcher", github.Name), Client: o.HTTPClient,
		})
		if err != nil {
			return nil, err
		}
		s.add(w)
	}
	if j := p.Jira; j != nil {
		u := j.URL
		if u == "" {
			u = o.Getenv("JIRA_URL")
		}
		w, err := jira.New(jira.Config{
			URL: u, JQLBase: j.Scope.JQLBase, Interval: j.Interval(), Timeout: j.Timeout(),
			Email: o.Getenv("JIRA_USER_EMAIL"), Token: o.Getenv("JIRA_API_TOKEN"),
			StatePath: l.SentinelJiraState(), Clock: o.Clock,
			Log: o.Log.With("watcher", jira.Name), Client: o.HTTPClient,
		})
		if err != nil {
			return nil, err
		}
		s.add(w)
	}
	if in := p.Inbox; in != nil {
		s.inbox = inbox.New(inbox.Config{
			Dir: l.Inbox(), RejectedDir: l.InboxRejected(), Interval: in.Interval(),
			Clock: o.Clock, Log: o.Log.With("watcher", inbox.Name), Events: o.Events,
		})
		s.add(s.inbox)
	}
	s.loadStatus()
	return s, nil
}

// newSentinel builds the watcher-less role: the admitter on the store's
// events queue and the pollers' lease.
func newSentinel(o Options) *Sentinel {
	events := queue.OnStore(o.Store, o.Layout, layout.QEvents, o.Events, o.Host)
	if o.LeaderStall == 0 {
		o.LeaderStall = config.DefaultSystem().Store.LeaderStall()
	}
	return &Sentinel{o: o, wakeCh: make(chan struct{}, 1),
		admit: queue.NewAdmitter(o.Layout, events), pollers: newPollers(o.Store, o.Log, o.LeaderStall)}
}

// Close gives up the pollers' lease, so that another host takes the
// polling over without waiting for the session to end.
func (s *Sentinel) Close() error { return s.pollers.release() }

// loadStatus reads the watcher record of earlier runs and keeps only the
// enabled watchers: a disabled one's old failures are no alert. An
// unreadable record starts over (it is rewritten at the next change).
func (s *Sentinel) loadStatus() {
	path := watchstatus.Path(s.o.Layout)
	st, err := watchstatus.Load(path)
	if err != nil {
		s.o.Log.Warn("watcher status unreadable; starting a new record", "path", path, "err", err)
		s.statusDirty = true
	}
	enabled := map[string]bool{}
	for _, sw := range s.watchers {
		enabled[sw.w.Name()] = true
	}
	for name := range st.Watchers {
		if !enabled[name] {
			delete(st.Watchers, name)
			s.statusDirty = true
		}
	}
	s.status = st
}

// record notes one poll's outcome in the watcher record and saves it when
// it changed. A record that cannot be saved is retried at the next poll.
func (s *Sentinel) record(name string, fetchErr error, log *slog.Logger) {
	if s.status.Record(name, fetchErr, s.o.Clock.Now()) {
		s.statusDirty = true
	}
	if !s.statusDirty {
		return
	}
	err := layout.EnsureDir(s.o.Layout.RoleStateDir(layout.RoleSentinel))
	if err == nil {
		err = watchstatus.Save(watchstatus.Path(s.o.Layout), s.status)
	}
	if err != nil {
		log.Warn("save watcher status; retried at the next poll", "err", err)
		return
	}
	s.statusDirty = false
}

func (s *Sentinel) add(w watcher.Watcher) { s.watchers = append(s.watchers, &scheduled{w: w}) }

// Watchers returns the enabled watchers' names, in run order.
func (s *Sentinel) Watchers() []string {
	var out []string
	for _, sw := range s.watchers {
		out = append(out, sw.w.Name())
	}
	return out
}

// RunnerInterval is the runner's idle period: the shortest watcher interval,
// capped at MaxRunnerInterval.
func (s *Sentinel) RunnerInterval() time.Duration {
	d := MaxRunnerInterval
	for _, sw := range s.watchers {
		if i := sw.w.Interval(); i > 0 && i < d {
			d = i
		}
	}
	return d
}

// Watches are the directories whose new files wake the runner: inbox/
// (*.json, not dot-temps) when the inbox watcher runs.
func (s *Sentinel) Watches() []runner.Watch {
	if s.inbox == nil {
		return nil
	}
	return []runner.Watch{{Dir: s.o.Layout.Inbox(), Match: inbox.Match}}
}

// Start runs the inbox's close-write notifier (SPEC §9.20); without it
// inbox files follow the age rule.
func (s *Sentinel) Start(ctx context.Context) error {
	if s.inbox == nil {
		return nil
	}
	if err := s.inbox.Start(ctx, s.wake); err != nil {
		s.o.Log.Warn("inbox: no close-write notification; files wait until 1 s old", "err", err)
	}
	return nil
}

func (s *Sentinel) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// Wake fires when an inbox file that was too young becomes old enough, or
// one was closed by its writer or renamed in.
func (s *Sentinel) Wake() <-chan struct{} { return s.wakeCh }

type everyTick interface{ EveryTick() bool }

// Tick runs every watcher that is due. A watcher's fetch error is logged
// and retried at its next interval; the tick fails only when events could
// not be admitted (so the heartbeat shows the trouble). The pollers (every
// watcher but the inbox) run only while this host holds PollersLease, and
// stop the moment it is lost.
func (s *Sentinel) Tick(ctx context.Context) error {
	s.pollers.ticking.Begin()
	defer s.pollers.ticking.End()
	var errs []error
	pctx, done, lead, err := s.pollers.lead(ctx)
	if err != nil {
		s.o.Log.Warn("pollers' lease not asked; polling waits for the next tick", "err", err)
	}
	if lead {
		defer done()
	}
	for _, sw := range s.watchers {
		wctx := ctx
		if _, isInbox := sw.w.(*inbox.Watcher); !isInbox {
			if !lead || pctx.Err() != nil {
				continue // another host polls (or this one just lost the lease)
			}
			wctx = pctx
		}
		now := s.o.Clock.Now()
		et, ok := sw.w.(everyTick)
		always := ok && et.EveryTick()
		if !always && !sw.next.IsZero() && now.Before(sw.next) {
			continue
		}
		if err := s.poll(wctx, sw.w); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sw.w.Name(), err))
		}
		// Interval read after the poll: it may follow a server hint.
		sw.next = now.Add(sw.w.Interval())
	}
	s.armInboxWake()
	return errors.Join(errs...)
}

// poll runs one fetch → parse → emit → post_emit round.
func (s *Sentinel) poll(ctx context.Context, w watcher.Watcher) (err error) {
	log := s.o.Log.With("watcher", w.Name())
	defer func() {
		// A panicking parser must not take the other watchers down; it
		// counts as a failed poll.
		if r := recover(); r != nil {
			log.Error("watcher panicked; retried next interval", "panic", fmt.Sprint(r))
			s.record(w.Name(), fmt.Errorf("watcher panicked: %v", r), log)
			err = nil
		}
	}()
	b, err := w.Fetch(ctx)
	if ctx.Err() != nil {
		// The pollers' lease was lost mid-fetch (or the role stops).
		// Nothing is emitted or recorded: what the fetch saw is the next
		// leader's to admit.
		return nil
	}
	// The record is the fetch's: a fetch that worked is a success even if
	// emitting its items fails (that fails the tick instead).
	s.record(w.Name(), err, log)
	if err != nil {
		log.Error("fetch failed; retrying next interval", "err", err)
		return nil
	}
	if b == nil {
		return nil
	}
	res := s.emitBatch(b.Items, log) // admit.go: one group commit per round
	var failed []error
	for i := range b.Items {
		if res[i].Outcome == watcher.Failed {
			failed = append(failed, errors.New(res[i].Reason))
		}
	}
	if err := w.PostEmit(ctx, b, res); err != nil {
		log.Error("post-emit failed", "err", err)
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

// Emit validates one item's event and admits it, emitting event.detected
// for a new one.
func (s *Sentinel) Emit(it watcher.Item, log *slog.Logger) watcher.Result {
	if log == nil {
		log = s.o.Log
	}
	if r, ok := s.check(it, log); !ok {
		return r
	}
	return s.outcome(it, s.admit.Admit(it.Event.ID, it.Event), log)
}

// check refuses an item that was skipped or whose event does not fit the
// schema; ok means it may be admitted.
func (s *Sentinel) check(it watcher.Item, log *slog.Logger) (watcher.Result, bool) {
	if it.Skip != "" {
		log.Warn("bad input skipped, nothing queued for it", "item", it.Key, "reason", it.Skip)
		return watcher.Result{Outcome: watcher.Skipped, Reason: it.Skip}, false
	}
	data, err := json.Marshal(it.Event)
	if err == nil {
		err = schema.Validate(doc.KindEvent, data)
	}
	if err != nil {
		reason := "event does not fit the schema: " + err.Error()
		log.Warn("bad input skipped, nothing queued for it", "item", it.Key, "event_id", it.Event.ID, "reason", reason)
		return watcher.Result{Outcome: watcher.Skipped, Reason: reason}, false
	}
	return watcher.Result{}, true
}

// outcome turns the admission's error into the item's result, emitting
// event.detected for a new event.
func (s *Sentinel) outcome(it watcher.Item, err error, log *slog.Logger) watcher.Result {
	switch {
	case err == nil:
		log.Info("event queued", "event_id", it.Event.ID, "type", it.Event.Type, "priority", it.Event.Priority)
		s.o.Events.Emit("event.detected", map[string]any{
			"event_id": it.Event.ID, "source": it.Event.Source, "event_type": it.Event.Type,
		})
		return watcher.Result{Outcome: watcher.Admitted}
	case errors.Is(err, queue.ErrDuplicate):
		log.Debug("event already known, skipped", "event_id", it.Event.ID)
		return watcher.Result{Outcome: watcher.Duplicate}
	}
	log.Error("queue event failed; retried next round", "event_id", it.Event.ID, "err", err)
	return watcher.Result{Outcome: watcher.Failed, Reason: err.Error()}
}

// emitBatch is Emit for a whole round: the admissible events are admitted
// together (queue.Admitter.AdmitBatch).
func (s *Sentinel) emitBatch(items []watcher.Item, log *slog.Logger) []watcher.Result {
	res := make([]watcher.Result, len(items))
	var idx []int
	var idl []string
	var evs []any
	for i, it := range items {
		r, ok := s.check(it, log)
		if !ok {
			res[i] = r
			continue
		}
		idx = append(idx, i)
		idl = append(idl, it.Event.ID)
		evs = append(evs, it.Event)
	}
	if len(idl) == 0 {
		return res
	}
	for j, err := range s.admit.AdmitBatch(idl, evs) {
		res[idx[j]] = s.outcome(items[idx[j]], err, log)
	}
	return res
}

// armInboxWake schedules a wake-up for when a waiting inbox file becomes
// old enough, so it is read then and not at the next idle tick.
func (s *Sentinel) armInboxWake() {
	if s.inbox == nil {
		return
	}
	ready := s.inbox.NextReady()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if ready.IsZero() {
		return
	}
	d := ready.Sub(s.o.Clock.Now()) + 10*time.Millisecond
	s.timer = time.AfterFunc(d, s.wake)
}
