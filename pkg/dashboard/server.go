// Package dashboard is the chamberlain's HTTP face (SPEC §10.16, seed 004's
// event stream): one embedded page that shows the kingdom at a glance,
// /api/v1/state (the same data as JSON, schemas/state.json),
// /api/v1/events (the internal events log as Server-Sent Events, each with a
// resumable id) and /metrics (Prometheus text format).
//
// Drive it with s, err := dashboard.New(opts) — which refuses a listen
// address outside loopback without a bearer token — then s.Start(ctx),
// which binds the address (or the unix socket layout.DashboardSocket) and
// serves until ctx ends. Besides that socket and its own token file
// (TokenFile) it only reads the runtime tree and the store (Options.Store,
// required).
//
// What guards it: a request whose Host header names neither the listen
// host, a loopback address, localhost nor an http.allowed_hosts entry gets
// 421 (a DNS-rebinding page carries its own name); the bearer token on
// every TCP port, loopback included (a port is open to every local
// account, the tree's 0700 is not): the configured one, else the one kept
// in the tree (TreeToken), so what the files deny another account the
// port denies too; the unix socket needs none (its mode is the tree's)
// unless RequireToken; at most MaxConns open connections, so idle or slow
// clients cannot take the descriptors the chamberlain's health duties need.
package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Defaults of the options left zero.
const (
	DefaultMaxClients  = 20
	DefaultKeepAlive   = 30 * time.Second // seed 004: a heartbeat every 30 s
	DefaultPoll        = time.Second      // re-read even when inotify said nothing
	DefaultRecentTasks = 20
	DefaultMaxConns    = 64
	// DefaultReadTimeout bounds reading one request (headers and body);
	// an event stream lifts it once its request is read.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection with no request.
	DefaultIdleTimeout = 60 * time.Second
	// streamWriteTimeout drops an event stream whose client stopped
	// reading: every write must finish within it.
	streamWriteTimeout = 30 * time.Second
	// logEvery is the least gap between two log lines of one kind of
	// HTTP trouble (a flood must not flood system.log too).
	logEvery = time.Minute
)

// Options configure a Server.
type Options struct {
	Layout layout.Layout
	// Listen is host:port ("127.0.0.1:8765"; port 0 picks a free one) or
	// config.ListenUnix for the socket layout.DashboardSocket.
	Listen string
	// Token is the bearer token from $TokenEnv. "" on a TCP port (or with
	// RequireToken) means the tree's own token, TreeToken; "" on a
	// non-loopback address is refused.
	Token string
	// TokenEnv names where Token came from, for error messages.
	TokenEnv string
	// RequireToken asks for the token on the unix socket too (a TCP port
	// always asks).
	RequireToken bool
	// AllowedHosts are further names the Host header may carry.
	AllowedHosts []string
	// MaxClients caps concurrent event-stream clients.
	MaxClients int
	// MaxConns caps open connections; more are closed at once.
	MaxConns int
	// ReadTimeout and IdleTimeout: see DefaultReadTimeout, DefaultIdleTimeout.
	ReadTimeout, IdleTimeout time.Duration
	// KeepAlive is the gap between SSE comment lines on a quiet stream.
	KeepAlive time.Duration
	// Poll is how often streams re-check the log without an inotify wake.
	Poll time.Duration
	// RetryBind is how often a server that could not bind tries again.
	RetryBind time.Duration
	// RecentTasks is how many finished tasks the state shows.
	RecentTasks int
	// HeartbeatThreshold: a role whose heartbeat is older is not up.
	HeartbeatThreshold time.Duration
	// Budget is king.yaml's budget block (SPEC §10.7; nil limits = none).
	Budget config.KingBudget
	Clock  clock.Clock
	Tmux   operator.Lister
	Log    *slog.Logger
	// Store is the kingdom's store (required): the event stream and the
	// metrics' counters read its event log, the state its pauses, waits
	// and spend.
	Store store.Store
	// Cluster is system.yaml's store section: with it the state, the page
	// and /metrics show every host of Store and the leader of each leader
	// role, read as `start status` reads them (operator.ReadCluster; nil:
	// not shown).
	Cluster *config.Store
	// Verdict returns the chamberlain's latest verdict (nil: none yet; a
	// nil Verdict: not shown): the state, the page and /metrics name its
	// problems as chamberlain --once does (a store unreachable, a lost
	// host, a held-back event log, a standby role that is not down).
	Verdict func() *Verdict
}

// Server serves the dashboard.
type Server struct {
	o       Options
	l       layout.Layout
	sh      *operator.Shared // the store's queues, pauses, waits and spend, as `start status` reads them
	clk     clock.Clock
	log     *slog.Logger
	notify  *notifier
	metrics *metrics
	mux     *http.ServeMux
	tokenH  [32]byte
	// tokenFile is where the token came from when the tree keeps it.
	tokenFile string
	// hosts are the Host names accepted besides loopback addresses;
	// anyIP accepts every address literal (a wildcard listen host).
	hosts map[string]bool
	anyIP bool
	// httpErrs and fullErrs rate-limit the log lines of serve errors and
	// of connections refused at the cap.
	httpErrs, fullErrs *rateLog

	mu      sync.Mutex
	base    context.Context // Start's: metrics collection and log lines outlive no server
	clients int
	addr    string
}

// baseCtx is Start's context: /metrics is collected only while Start's
// server serves it.
func (s *Server) baseCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// New checks the options and builds the server (nothing is bound yet).
func New(o Options) (*Server, error) {
	h := config.HTTP{Listen: o.Listen, TokenEnv: o.TokenEnv, RequireToken: o.RequireToken}
	if err := h.Check(o.Token); err != nil {
		return nil, err
	}
	var tokenFile string
	if o.Token == "" && (o.Listen != config.ListenUnix || o.RequireToken) {
		tok, err := TreeToken(o.Layout)
		if err != nil {
			return nil, err
		}
		o.Token, tokenFile = tok, TokenFile(o.Layout)
	}
	orDefault(&o.MaxClients, DefaultMaxClients)
	orDefault(&o.KeepAlive, DefaultKeepAlive)
	orDefault(&o.Poll, DefaultPoll)
	orDefault(&o.RetryBind, 30*time.Second)
	orDefault(&o.MaxConns, DefaultMaxConns)
	orDefault(&o.ReadTimeout, DefaultReadTimeout)
	orDefault(&o.IdleTimeout, DefaultIdleTimeout)
	orDefault(&o.RecentTasks, DefaultRecentTasks)
	orDefault(&o.HeartbeatThreshold, 120*time.Second)
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, l: o.Layout, tokenFile: tokenFile, clk: o.Clock, log: o.Log, notify: newNotifier(),
		sh: operator.StoreShared(o.Layout, o.Store)}
	s.hosts, s.anyIP = allowedHosts(o.Listen, o.AllowedHosts)
	s.httpErrs = &rateLog{to: o.Log, clk: o.Clock, every: logEvery, level: slog.LevelError}
	s.fullErrs = &rateLog{to: o.Log, clk: o.Clock, every: logEvery, level: slog.LevelWarn}
	if o.Token != "" {
		s.tokenH = sha256.Sum256([]byte(o.Token))
	}
	s.metrics = newMetrics(s)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.handlePage)
	s.mux.HandleFunc("GET /api/v1/state", s.handleState)
	s.mux.HandleFunc("GET /api/v1/events", s.handleEvents)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	return s, nil
}

// orDefault sets an option left zero (or negative) to its default d.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Start binds the address and serves in the background until ctx ends.
// A dashboard that cannot bind (the port is taken) must not take the
// chamberlain's health duties down with it: the failure is logged and the
// bind retried every Options.RetryBind until it succeeds.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	s.base = ctx
	s.mu.Unlock()
	// The events log's readers: the streams' wake-ups, the metrics' counters.
	go s.notify.run(ctx, s.l, s.o.Poll, s.log)
	go s.metrics.follow(ctx)
	ln, err := s.listen()
	if err == nil {
		s.serve(ctx, ln)
		return nil
	}
	s.log.Error("dashboard cannot listen; retrying", "addr", s.o.Listen, "err", err)
	go func() {
		t := time.NewTicker(s.o.RetryBind)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if ln, err := s.listen(); err == nil {
				s.serve(ctx, ln)
				return
			}
		}
	}()
	return nil
}

func (s *Server) listen() (net.Listener, error) {
	if s.o.Listen == config.ListenUnix {
		return listenUnix(s.l.DashboardSocket())
	}
	return net.Listen("tcp", s.o.Listen)
}

// serve serves ln until ctx ends. Every connection counts against MaxConns
// until it closes, idle keep-alives included; a connection beyond the cap is
// closed at once, so the dashboard holds at most MaxConns descriptors for
// clients whatever they do (an event stream adds one for the log it reads,
// at most MaxClients). Slow or silent clients are cut by the read and idle
// timeouts; there is no WriteTimeout, which would end every event stream,
// so streams bound each write themselves (streamWriteTimeout).
func (s *Server) serve(ctx context.Context, ln net.Listener) {
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	ln = &limitListener{Listener: ln, sem: make(chan struct{}, s.o.MaxConns), full: func() {
		s.fullErrs.log("dashboard: connection refused, http.max_connections reached", "max", s.o.MaxConns)
	}}
	srv := &http.Server{
		Handler:           s.checkHost(s.auth(s.mux)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.o.ReadTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(s.httpErrs, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("dashboard stopped", "err", err)
		}
	}()
	if s.o.Listen == config.ListenUnix {
		s.log.Info("dashboard on unix socket " + s.addr)
		return
	}
	where := "the token in $" + s.o.TokenEnv
	if s.tokenFile != "" {
		where = "the token in " + s.tokenFile
	}
	s.log.Info("dashboard on http://" + s.addr + "/ (open it with ?token= and " + where + ", or send Authorization: Bearer)")
}

// auth requires the bearer token when one is set (every TCP port; the
// socket only with RequireToken). It is accepted as Authorization: Bearer,
// as HTTP Basic's password (a browser asks once), or as ?token= once: that
// sets an HttpOnly SameSite=Strict cookie the page's own requests carry,
// and the page's address is answered with a redirect that drops the token
// from the address bar and the history.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") && s.tokenOK(q.Get("token")) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: hex.EncodeToString(s.tokenH[:]), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if r.URL.Path == "/" {
				q.Del("token")
				u := *r.URL
				u.RawQuery = q.Encode()
				w.Header().Set("Cache-Control", "no-store")
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Add("WWW-Authenticate", `Bearer realm="kingdom"`)
		w.Header().Add("WWW-Authenticate", `Basic realm="kingdom"`)
		msg := "unauthorized: send Authorization: Bearer <token>, or open /?token=<token>"
		if s.tokenFile != "" {
			msg += " (the token is in " + s.tokenFile + ", readable by the kingdom's user only)"
		}
		http.Error(w, msg, http.StatusUnauthorized)
	})
}

// authorized reports whether r carries the token in its Authorization
// header or the cookie.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if p := "Bearer "; len(h) >= len(p) && strings.EqualFold(h[:len(p)], p) {
		return s.tokenOK(strings.TrimSpace(h[len(p):]))
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return s.tokenOK(pw)
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		// The cookie holds the token's hash (any token fits a cookie).
		g, err := hex.DecodeString(c.Value)
		return err == nil && subtle.ConstantTimeCompare(g, s.tokenH[:]) == 1
	}
	return false
}

// tokenOK compares given with the token; hashing first makes the compare
// constant-time in the length too.
func (s *Server) tokenOK(given string) bool {
	g := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(g[:], s.tokenH[:]) == 1
}
