// Package envoy is Kingdom's voice in Slack (SPEC §4.7) and the only code
// that imports slack-go. It reads queue/messages/pending/ and posts each
// message with the Web API (thread bookkeeping in state/envoy/), and turns
// Slack DMs, mentions and thread replies received over Socket Mode into
// events through the queue's admitter. Questions, thread starts, ❌ and
// parks carry buttons (Answer, Cancel task, Retry, Unpark) bound to
// records in the store (buttons.go). Without a bot token it runs in
// console mode: outbound messages are printed and appended to
// logs/envoy-console.log (under #console when a message names no channel
// and none is configured), and `envoy reply` plays a human's thread reply.
// A failed message is sent again by `envoy retry` (RetryFailed), or by
// itself after a config change when the config caused it (retry.go).
//
// The queues and the envoy's documents are the store's (Options.Store, in
// both modes), the envoy leads on one host at a time under the store's
// lease (UseLease), and each delivery is recorded in the store before its
// post, so that a restarted or failed-over envoy never posts twice
// (deliveries.go).
//
// Drive it with the shared runner:
//
//	e, err := envoy.New(envoy.Options{Layout: l, Store: st, Host: host, Config: cfg, Log: log, Events: em,
//		BotToken: os.Getenv(cfg.Slack.BotTokenEnv), AppToken: os.Getenv(cfg.Slack.AppTokenEnv)})
//	opts.Watches = e.Watches()
//	runner.Run(ctx, opts, e) // Start opens Socket Mode; Tick sends the outbound queue
package envoy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Options builds an Envoy.
type Options struct {
	Layout layout.Layout
	// Store (required) holds the messages and events queues, the envoy's
	// documents (mappings, awaited questions, conversations, deliveries)
	// and the delivery records (deliveries.go).
	Store store.Store
	// Host is this host's id.
	Host string
	// CallTimeout bounds each store call (default 10 s,
	// store.call_timeout_seconds).
	CallTimeout time.Duration
	Config      *config.Envoy
	Log         *slog.Logger
	Events      *eventlog.Emitter
	Clock       clock.Clock
	// BotToken (xoxb) enables the Web API; without it the envoy runs in
	// console mode. AppToken (xapp) enables Socket Mode (inbound).
	BotToken, AppToken string
	// Stdout receives console-mode output (default os.Stdout).
	Stdout io.Writer
	// Sleep waits between send attempts and socket reconnects (default: a
	// timer honoring ctx). Tests inject one that records and returns.
	Sleep func(ctx context.Context, d time.Duration) error
	// PingInterval is how long Socket Mode waits for a server ping before
	// reconnecting (default 30 s, slack-go's).
	PingInterval time.Duration
	// ConfigPath is envoy.yaml: when set, a tick reloads it after it
	// changed (retry.go). "" = Config stays as given.
	ConfigPath string
}

// Envoy is the envoy role.
type Envoy struct {
	l        layout.Layout
	cfg      atomic.Pointer[config.Envoy] // swapped when envoy.yaml changes
	log      *slog.Logger
	em       *eventlog.Emitter
	clock    clock.Clock
	sleep    func(ctx context.Context, d time.Duration) error
	messages *queue.Queue
	admit    *queue.Admitter
	// tasks and events are read for the buttons (buttons.go): a task's
	// attempt, its asker, the source event a Retry admits again.
	tasks, events *queue.Queue
	st            *stateStore
	poster        poster
	// The config watch (retry.go): envoy.yaml's path and the stamp it had
	// when last loaded; the fingerprint failed/ was last scanned under.
	cfgPath   string
	cfgStamp  string
	scannedFP string
	// afterStep, when set (tests), runs at the named points of a send
	// (send.go): "recorded", "finished".
	afterStep func(step, msgID string)

	web          *webPoster // the Web API; nil in console mode
	appToken     string
	pingInterval time.Duration

	mu      sync.Mutex
	seenEvt map[string]time.Time // Slack event_ids handled (redelivery dedupe)
	// holdUntil pauses outbound sends after a long Retry-After.
	holdUntil time.Time
	// disk holds sends while the state cannot be written (diskhold.go).
	disk diskState
	// lastPrune is when prune last looked for expired state.
	lastPrune time.Time
}

// New builds the envoy. It does no I/O.
func New(o Options) (*Envoy, error) {
	if o.Config == nil {
		o.Config = config.DefaultEnvoy()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	e := &Envoy{
		l: o.Layout, log: o.Log, em: o.Events, clock: o.Clock, sleep: o.Sleep,
		messages:     queue.OnStore(o.Store, o.Layout, layout.QMessages, o.Events, o.Host),
		st:           newState(o.Store, o.Host, o.Clock, o.Log, o.CallTimeout),
		cfgPath:      o.ConfigPath,
		appToken:     o.AppToken,
		pingInterval: o.PingInterval,
		seenEvt:      map[string]time.Time{},
	}
	e.cfg.Store(o.Config)
	e.st.replay = e.replay
	e.events = queue.OnStore(o.Store, o.Layout, layout.QEvents, o.Events, o.Host)
	e.tasks = queue.OnStore(o.Store, o.Layout, layout.QTasks, o.Events, o.Host)
	e.admit = queue.NewAdmitter(o.Layout, e.events)
	if o.BotToken == "" {
		e.poster = &consolePoster{out: o.Stdout, path: o.Layout.EnvoyConsoleLog(),
			lock: o.Layout.RotateLock(), clock: o.Clock}
		if o.AppToken != "" {
			return nil, errors.New("slack app token set without a bot token: set both for Slack, or neither for console mode")
		}
		return e, nil
	}
	// The trailing slash matters: slack-go appends method names to it.
	apiURL := o.Config.Slack.APIURL
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	opts := []slack.Option{
		slack.OptionAPIURL(apiURL),
		// slack-go's default client has no timeout: 30 s bounds every Web
		// API call.
		slack.OptionHTTPClient(&http.Client{Timeout: 30 * time.Second}),
	}
	if o.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(o.AppToken))
	}
	e.web = &webPoster{api: slack.New(o.BotToken, opts...)}
	e.poster = e.web
	return e, nil
}

// config is the envoy's current configuration.
func (e *Envoy) config() *config.Envoy { return e.cfg.Load() }

// Console reports whether the envoy runs without Slack.
func (e *Envoy) Console() bool { return e.web == nil }

// Watches are the directories whose new files should wake the envoy: the
// outbound queue and the console inbox of `envoy reply`.
func (e *Envoy) Watches() []runner.Watch {
	js := func(name string) bool { return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") }
	return []runner.Watch{
		{Dir: e.l.QueueState(layout.QMessages, layout.Pending), Match: js},
		{Dir: e.l.EnvoyConsoleInbox(), Match: js},
	}
}

// Tick reloads a changed envoy.yaml (sending the failures it may fix
// again), handles `envoy reply` envelopes, forgets expired state, carries
// out the button clicks a crash left half done (buttons.go), sends
// every pending message, oldest first, and writes the state files.
func (e *Envoy) Tick(ctx context.Context) error {
	var errs []error
	e.reloadConfig()
	if err := e.requeueConfigFailures(); err != nil {
		errs = append(errs, err)
	}
	if err := e.ProcessConsoleInbox(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.prune(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.finishButtons(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.sendPending(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.st.flush(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Start opens Socket Mode in the background when an app token is set. It
// does not block; the socket reconnects on its own until ctx ends.
func (e *Envoy) Start(ctx context.Context) error {
	if e.Console() {
		e.log.Info("console mode: no Slack bot token; outbound goes to logs/envoy-console.log")
		return nil
	}
	if e.appToken == "" {
		e.log.Warn("no Slack app token: Socket Mode off, outbound only")
		return nil
	}
	go e.runSocket(ctx)
	return nil
}

// awaitedTTL is how long an unanswered question stays awaited (SPEC §9.31).
const awaitedTTL = 7 * 24 * time.Hour

// pruneEvery is how often prune looks for expired state: its ages are
// hours and days, and a look costs a pass over every entry.
const pruneEvery = time.Minute

// prune drops expired conversations, awaited entries and thread mappings
// older than a week, and deliveries and their records whose message has
// left pending/.
// The change reaches the files at the end of the tick.
func (e *Envoy) prune(ctx context.Context) error {
	now := e.clock.Now()
	e.mu.Lock()
	due := e.lastPrune.IsZero() || now.Sub(e.lastPrune) >= pruneEvery || now.Before(e.lastPrune)
	if due {
		e.lastPrune = now
	}
	e.mu.Unlock()
	if !due {
		return nil
	}
	pending := func(id string) bool { return e.messages.Exists(layout.Pending, id) }
	defer e.st.settleGone(pending)
	return e.st.mutate(ctx, func(s *State) bool {
		n := len(s.Conversations) + len(s.Awaiting) + len(s.Mappings) + len(s.Deliveries)
		maps.DeleteFunc(s.Conversations, func(_ string, c Conversation) bool {
			t, err := doc.ParseTime(c.ExpiresAt)
			return err != nil || !now.Before(t)
		})
		aged := func(at string) bool {
			t, err := doc.ParseTime(at)
			return err == nil && now.Sub(t) > awaitedTTL
		}
		maps.DeleteFunc(s.Awaiting, func(_ string, a Awaited) bool { return aged(a.CreatedAt) })
		// A mapping is cleared by its task's final notification; one whose
		// task never got one (needs_human, a final message in failed/)
		// would stay forever. No task lives a week; a resume carries its
		// thread in the message itself (§9.8).
		maps.DeleteFunc(s.Mappings, func(_ string, m ThreadMapping) bool { return aged(m.CreatedAt) })
		maps.DeleteFunc(s.Deliveries, func(id string, _ Delivery) bool { return !pending(id) })
		return len(s.Conversations)+len(s.Awaiting)+len(s.Mappings)+len(s.Deliveries) != n
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
