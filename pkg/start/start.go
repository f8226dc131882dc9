// Package start is the launcher and watchdog (SPEC §4.1): it creates the
// runtime tree, validates every config file, launches one tmux session per
// role (sentinel, king, envoy, chamberlain and one per installed general),
// relaunches missing sessions every watchdog round, gives up on a role that
// keeps dying (crash-loop guard, with an urgent alert), and stops every role
// gracefully on SIGTERM. `start` is the only launcher in the kingdom (§9.14).
//
// It holds this host's lease in the store for its life (Options.Host): a
// second host with a live host id is refused (HostHeldError).
//
//	w, err := start.New(start.Options{Layout: l, BinDir: dir, Tmux: tc, Log: log, Events: em,
//		Store: st, Host: start.Host{ID: host, Version: version, Started: time.Now(), Open: openStore}})
//	err = w.Run(ctx) // until ctx ends; then stops every role
package start

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// CoreRoles are the always-on roles besides the generals.
var CoreRoles = layout.CoreRoles

// DeathCountsWithin: only deaths this soon after launch count toward the
// crash-loop guard (SPEC §9.14); a role that ran for an hour and then died
// is not crash-looping.
const DeathCountsWithin = 60 * time.Second

// livenessPoll is how often the pane processes are probed (kill(pid, 0), no
// child process) to time deaths precisely.
const livenessPoll = time.Second

// Options configures a Watchdog.
type Options struct {
	Layout layout.Layout
	BinDir string       // where the role binaries are
	Tmux   *tmux.Client // sessions live on its socket
	Log    *slog.Logger
	Events *eventlog.Emitter
	Clock  clock.Clock
	// Journal receives the WARN and ERROR lines of every other role,
	// relayed from logs/system.log (start's stdout: the journal under
	// systemd); nil relays nothing.
	Journal io.Writer
	// Store is the installation's store (required): the crash-loop alert
	// is queued in its messages queue.
	Store store.Store
	// Host is this host: start renews it in the store's hosts registry
	// and holds its lease (HostLeaseName) on a store of its own
	// (Host.Open, required).
	Host Host
}

// roleState is what the watchdog remembers of one role.
type roleState struct {
	launchedAt time.Time
	pid        int
	alive      bool
	deaths     []time.Time // deaths that count, within the window
	givenUp    bool
	givenUpFP  string // fingerprint (binary + config mtimes) when it gave up
}

// Watchdog launches and supervises the role sessions.
type Watchdog struct {
	o     Options
	sys   *config.System
	roles map[string]*roleState
	msgs  *queue.Queue
	relay *relay
	cfg   *configWatch
	hl    *hostLease
}

// New builds a watchdog. It loads and validates every config file first
// (fail fast: the error names file, line and key).
func New(o Options) (*Watchdog, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	all, err := config.LoadAll(o.Layout.ConfigDir())
	if err != nil {
		return nil, err
	}
	w := &Watchdog{
		o:     o,
		sys:   all.System,
		roles: map[string]*roleState{},
		msgs:  queue.OnStore(o.Store, o.Layout, layout.QMessages, o.Events, ""),
	}
	if o.Journal != nil {
		w.relay = newRelay(o.Layout.SystemLog(), o.Journal, relayPerMinute)
	}
	return w, nil
}

// Spec is one role session: its name and argv.
type Spec struct {
	Name string
	Argv []string
}

// Specs returns the sessions that should run now: the core roles and one per
// manifest in config/generals (rescanned every round, §9.27).
func (w *Watchdog) Specs() ([]Spec, error) {
	base := w.o.Layout.Base
	var specs []Spec
	// --standby: a relaunch that meets a leader lock still held (a hung
	// predecessor being killed) waits for it instead of exiting, which the
	// crash-loop guard would count as a crash.
	for _, r := range CoreRoles {
		specs = append(specs, Spec{Name: r, Argv: []string{filepath.Join(w.o.BinDir, r), "--base-dir", base, "--standby"}})
	}
	// LoadManifests returns the manifests that loaded beside the errors of
	// those that did not: one bad file must not take the others down.
	ms, err := config.LoadManifests(w.o.Layout.GeneralsConfigDir())
	for _, m := range ms {
		specs = append(specs, Spec{Name: m.Name, Argv: []string{filepath.Join(w.o.BinDir, "general"), "--name", m.Name, "--base-dir", base, "--standby"}})
	}
	return specs, err
}

// IsRoleSession reports whether a tmux session name belongs to a role start
// manages (core roles and gen-*), as opposed to soldiers.
func IsRoleSession(name string) bool {
	for _, r := range CoreRoles {
		if name == r {
			return true
		}
	}
	return strings.HasPrefix(name, "gen-")
}

func (w *Watchdog) sessionEnv() map[string]string {
	env := map[string]string{
		layout.EnvBase:    w.o.Layout.Base,
		"KINGDOM_BIN_DIR": w.o.BinDir,
	}
	if w.o.Tmux.Socket != "" {
		env[tmux.EnvSocket] = w.o.Tmux.Socket
	}
	// The tmux server may predate this start; pass the variables roles
	// need explicitly rather than relying on its environment (§9.13).
	for _, k := range []string{"PATH", "HOME", "LANG", "TZ", "KINGDOM_LOG_LEVEL", "SLACK_DEFAULT_CHANNEL", EnvTmuxTmpdir} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// Round runs one watchdog round: rescan manifests, launch missing sessions
// (unless given up), stop sessions of uninstalled generals.
func (w *Watchdog) Round(ctx context.Context) error {
	specs, err := w.Specs()
	if err != nil {
		w.o.Log.Error("load general manifests", "err", err)
	}
	live, err := w.o.Tmux.List(ctx)
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	byName := map[string]tmux.Session{}
	for _, s := range live {
		byName[s.Name] = s
	}
	want := map[string]bool{}
	now := w.o.Clock.Now()
	for _, sp := range specs {
		want[sp.Name] = true
		rs := w.state(sp.Name)
		if s, ok := byName[sp.Name]; ok {
			if s.PID <= 0 || PIDAlive(s.PID) {
				if !rs.alive {
					// Adopt a session that runs already (start restarted).
					rs.alive, rs.pid = true, s.PID
					if rs.launchedAt.IsZero() {
						rs.launchedAt = s.Created
					}
				}
				continue
			}
			// Its process has ended and tmux has not closed the session
			// yet (a round right after the death poll found): adopting
			// it would record the death twice.
			if err := w.o.Tmux.Kill(ctx, sp.Name); err != nil {
				w.o.Log.Warn("kill the session of a dead role", "role", sp.Name, "err", err)
			}
		}
		if rs.alive {
			w.recordDeath(sp.Name, rs, now)
		}
		if rs.givenUp {
			if fp := w.fingerprint(sp); fp != rs.givenUpFP {
				w.o.Log.Info("binary or config changed: trying the role again", "role", sp.Name)
				rs.givenUp, rs.deaths = false, nil
			} else {
				continue
			}
		}
		w.launch(ctx, sp, rs, now)
	}
	// Generals that were uninstalled (their manifest file is gone, not
	// merely invalid for now): stop their sessions.
	for name, s := range byName {
		if strings.HasPrefix(name, "gen-") && !want[name] && !fileExists(w.o.Layout.GeneralManifest(name)) {
			w.o.Log.Info("general uninstalled: stopping its session", "role", name)
			w.stopSession(ctx, s, w.sys.StopGrace())
			delete(w.roles, name)
		}
	}
	return nil
}

func (w *Watchdog) state(name string) *roleState {
	rs := w.roles[name]
	if rs == nil {
		rs = &roleState{}
		w.roles[name] = rs
	}
	return rs
}

func (w *Watchdog) launch(ctx context.Context, sp Spec, st *roleState, now time.Time) {
	if _, err := os.Stat(sp.Argv[0]); err != nil {
		w.o.Log.Error("role binary missing", "role", sp.Name, "path", sp.Argv[0])
		return
	}
	// A last-exit left now is this launch's: the role writes it as it dies.
	if err := os.Remove(w.o.Layout.LastExit(sp.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.o.Log.Warn("remove last exit record", "role", sp.Name, "err", err)
	}
	// The pid comes from the launching call itself: a role that dies at
	// once has no session left to ask, and poll must still see it die.
	pid, err := w.o.Tmux.Start(ctx, sp.Name, tmux.NewOptions{Dir: w.o.Layout.Base, Env: w.sessionEnv()}, sp.Argv...)
	if err != nil {
		w.o.Log.Error("launch role session", "role", sp.Name, "err", err)
		return
	}
	if pid <= 0 {
		pid, _ = w.o.Tmux.PanePID(ctx, sp.Name)
	}
	st.launchedAt, st.pid, st.alive = now, pid, true
	w.o.Log.Info("launched role session", "role", sp.Name, "pid", pid)
	w.o.Events.Emit("recovery.session_started", map[string]any{"role": sp.Name, "pid": pid})
}

// recordDeath notes that a role's session ended, and trips the crash-loop
// guard when it died too often too soon after launch.
func (w *Watchdog) recordDeath(name string, st *roleState, now time.Time) {
	st.alive = false
	lived := now.Sub(st.launchedAt)
	data := map[string]any{"role": name, "lived_seconds": int(lived.Seconds())}
	why, exit := "", -1
	if le, err := app.ReadLastExit(w.o.Layout.LastExit(name)); err != nil {
		w.o.Log.Warn("read last exit", "role", name, "err", err)
	} else if le != nil {
		data["exit"], data["error"] = le.Exit, le.Error
		exit = le.Exit
		why = fmt.Sprintf(" (exit %d: %s)", le.Exit, le.Error)
		w.o.Log.Warn("role session ended", "role", name, "lived", lived.Round(time.Second), "exit", le.Exit, "error", le.Error)
	} else {
		w.o.Log.Warn("role session ended", "role", name, "lived", lived.Round(time.Second), "exit", "unknown")
	}
	w.o.Events.Emit("system.role_died", data)
	if exit == app.ExitLeadershipLost {
		// Its lease was lost (a database link cut, another host took
		// over): it is relaunched in standby at once, and a cluster's
		// failovers are not crashes.
		w.o.Log.Info("role lost its leadership: relaunching it in standby", "role", name)
		return
	}
	if lived > DeathCountsWithin {
		return
	}
	window := w.sys.CrashLoopWindow()
	keep := st.deaths[:0]
	for _, d := range st.deaths {
		if now.Sub(d) <= window {
			keep = append(keep, d)
		}
	}
	st.deaths = append(keep, now)
	if len(st.deaths) >= w.sys.Watchdog.CrashLoop.MaxRestarts && !st.givenUp {
		st.givenUp = true
		st.givenUpFP = w.fingerprint(Spec{Name: name, Argv: []string{w.binFor(name)}})
		w.o.Log.Error("role keeps dying: not restarting it", "role", name, "deaths", len(st.deaths), "window", window, "cat", "ALERT")
		w.o.Events.Emit("system.crash_loop", map[string]any{"role": name, "deaths": len(st.deaths), "window_minutes": w.sys.Watchdog.CrashLoop.WindowMinutes})
		w.alert(name, len(st.deaths), why, now)
	}
}

func (w *Watchdog) binFor(name string) string {
	if strings.HasPrefix(name, "gen-") {
		return filepath.Join(w.o.BinDir, "general")
	}
	return filepath.Join(w.o.BinDir, name)
}

// fingerprint changes when the operator fixes the cause: a new binary or an
// edited config. It is how a given-up role gets another chance without
// restarting start.
func (w *Watchdog) fingerprint(sp Spec) string {
	var parts []string
	paths := []string{sp.Argv[0], w.o.Layout.ConfigDir(), w.o.Layout.GeneralsConfigDir()}
	if strings.HasPrefix(sp.Name, "gen-") {
		paths = append(paths, w.o.Layout.GeneralManifest(sp.Name))
	} else {
		paths = append(paths, w.o.Layout.ConfigFile(sp.Name+".yaml"))
	}
	paths = append(paths, w.o.Layout.ConfigFile("system.yaml"))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			parts = append(parts, fmt.Sprintf("%d", fi.ModTime().UnixNano()))
		} else {
			parts = append(parts, "-")
		}
	}
	return strings.Join(parts, "/")
}

// alert queues the crash-loop message; why is the last death's recorded
// exit, if any.
func (w *Watchdog) alert(role string, deaths int, why string, now time.Time) {
	id := fmt.Sprintf("msg-start-crashloop-%s-%d", role, now.Unix())
	content := fmt.Sprintf(":rotating_light: %s died %d times within %d minutes and will not be restarted%s. "+
		"Check logs/system.log and `tmux attach`-free diagnosis with `start doctor`; fix the binary or config (start retries when either changes) or restart the kingdom.",
		role, deaths, w.sys.Watchdog.CrashLoop.WindowMinutes, why)
	msg := doc.Message{
		ID: id, Type: doc.MessageNotification, Urgency: doc.UrgencyUrgent, Content: content,
		Context:   map[string]any{"kind": "crash_loop", "role": role, "deaths": deaths},
		CreatedAt: doc.FormatTime(now), Status: "pending",
	}
	if err := w.msgs.PutOnce(layout.Pending, id, msg); err != nil && !errors.Is(err, queue.ErrExists) {
		w.o.Log.Error("queue crash-loop alert", "role", role, "err", err)
	}
}

// poll probes the known pane pids without spawning anything and records
// deaths as they happen; it reports whether a role died.
func (w *Watchdog) poll() bool {
	now := w.o.Clock.Now()
	died := false
	for name, st := range w.roles {
		if st.alive && st.pid > 0 && !PIDAlive(st.pid) {
			w.recordDeath(name, st, now)
			died = true
		}
	}
	return died
}

// check is one liveness probe: a death starts a round at once, so a dead
// role is back within livenessPoll instead of a round later (the
// crash-loop guard still counts its deaths).
func (w *Watchdog) check(ctx context.Context) {
	if !w.poll() {
		return
	}
	if err := w.Round(ctx); err != nil {
		w.o.Log.Error("watchdog round", "err", err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// PIDAlive reports whether pid runs. A zombie (exited, not yet reaped by
// its parent, the tmux server) counts as dead.
func PIDAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// GivenUp lists the roles the crash-loop guard stopped restarting.
func (w *Watchdog) GivenUp() []string {
	var out []string
	for n, st := range w.roles {
		if st.givenUp {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Run launches every role and supervises them until ctx ends, then stops
// them all (SIGTERM, then kill after the grace period).
func (w *Watchdog) Run(ctx context.Context) error {
	w.o.Events.Emit("system.startup", map[string]any{"pid": os.Getpid(), "base_dir": w.o.Layout.Base})
	w.o.Log.Info("kingdom starting", "base_dir", w.o.Layout.Base, "bin_dir", w.o.BinDir, "socket", w.o.Tmux.Socket, "cat", "SYSTEM")
	removed, err := RemoveOldLayout(w.o.Layout)
	for _, p := range removed {
		w.o.Log.Info("removed a leftover of an earlier version", "path", p, "cat", "SYSTEM")
	}
	if err != nil {
		w.o.Log.Warn("leftovers of an earlier version not removed", "err", err, "cat", "SYSTEM")
	}
	// Renewed once before the roles start, so generals launched now do not
	// begin self-fenced; a host id another live host holds starts nothing.
	hl := newHostLease(w.o, w.sys.Store.SelfFence())
	defer hl.close() // after the roles have stopped
	var held *HostHeldError
	if err := hl.step(ctx); errors.As(err, &held) {
		return err
	}
	w.hl = hl
	done, fatal := make(chan struct{}), make(chan error, 1)
	defer func() { <-done }()
	go func() {
		defer close(done)
		hl.run(ctx, fatal)
	}()
	if err := w.Round(ctx); err != nil {
		w.o.Log.Error("watchdog round", "err", err)
	}
	w.cfg = newConfigWatch(w.o.Layout)
	round := time.NewTicker(w.sys.WatchdogInterval())
	defer round.Stop()
	poll := time.NewTicker(livenessPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			w.o.Log.Info("kingdom stopping", "cat", "SYSTEM")
			w.o.Events.Emit("system.shutdown", map[string]any{"pid": os.Getpid()})
			w.StopAll(context.WithoutCancel(ctx))
			return nil
		case err := <-fatal:
			w.o.Log.Error("stopping the kingdom: another host runs with this host id", "err", err, "cat", "ALERT")
			w.StopAll(context.WithoutCancel(ctx))
			return err
		case <-poll.C:
			w.check(ctx)
			w.noticeConfig()
			if w.relay != nil {
				w.relay.step(w.o.Clock.Now())
			}
		case <-round.C:
			if err := w.Round(ctx); err != nil {
				w.o.Log.Error("watchdog round", "err", err)
			}
		}
	}
}

// StopAll stops every role session: SIGTERM to each pane process at once,
// then kill-session for those still alive after the grace period.
func (w *Watchdog) StopAll(ctx context.Context) {
	if _, err := StopRoles(ctx, w.o.Tmux, w.sys.StopGrace(), w.o.Log); err != nil {
		w.o.Log.Error("stop the role sessions", "err", err)
	}
	for _, st := range w.roles {
		st.alive = false
	}
}

// StopRoles stops every role session on the tmux socket (not soldiers)
// and returns the sessions it stopped; an error says which could not be
// listed or killed.
func StopRoles(ctx context.Context, tc *tmux.Client, grace time.Duration, log *slog.Logger) ([]tmux.Session, error) {
	live, err := tc.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the sessions of tmux socket %s: %w", tc.Path(), err)
	}
	var roles []tmux.Session
	for _, s := range live {
		if IsRoleSession(s.Name) {
			roles = append(roles, s)
		}
	}
	for _, s := range roles {
		if s.PID > 0 {
			syscall.Kill(s.PID, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	var stopped []tmux.Session
	var errs []error
	for _, s := range roles {
		for s.PID > 0 && PIDAlive(s.PID) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // waiting for a real process to exit
		}
		if err := tc.Kill(ctx, s.Name); err != nil {
			log.Error("kill session", "role", s.Name, "err", err)
			errs = append(errs, fmt.Errorf("kill %s: %w", s.Name, err))
			continue
		}
		log.Info("stopped role session", "role", s.Name)
		stopped = append(stopped, s)
	}
	return stopped, errors.Join(errs...)
}

func (w *Watchdog) stopSession(ctx context.Context, s tmux.Session, grace time.Duration) {
	if s.PID > 0 {
		syscall.Kill(s.PID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for PIDAlive(s.PID) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // waiting for a real process to exit
		}
	}
	w.o.Tmux.Kill(ctx, s.Name)
}

// EnvTmuxTmpdir is tmux's own variable for the directory of its sockets
// (default /tmp). Under systemd's PrivateTmp the unit points it inside the
// base dir, so a shell outside the unit's private /tmp still reaches the
// server by the recorded path.
const EnvTmuxTmpdir = "TMUX_TMPDIR"

// RecordSocket writes the path of tc's tmux server socket to
// layout.TmuxSocketFile, where every other command of the installation
// (app.Tmux) finds it. A socket name alone is not enough: tmux resolves
// a name under the caller's own uid, so a root shell asking for "kingdom"
// looks in /tmp/tmux-0/ and sees no sessions. It also creates
// $TMUX_TMPDIR when set, which tmux needs to exist.
func RecordSocket(l layout.Layout, tc *tmux.Client) (string, error) {
	if d := os.Getenv(EnvTmuxTmpdir); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("create tmux socket dir %s: %w", d, err)
		}
	}
	p := SocketPath(tc.Socket, os.Getenv(EnvTmuxTmpdir), os.Getuid())
	if err := atomicfile.WriteFile(l.TmuxSocketFile(), []byte(p+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("record tmux socket: %w", err)
	}
	return p, nil
}

// SocketPath is tmux.SocketPath: where user uid's `tmux -L socket` puts
// its socket.
func SocketPath(socket, tmpdir string, uid int) string { return tmux.SocketPath(socket, tmpdir, uid) }

// FindBinDir returns the directory holding the role binaries: the one of
// start's own executable if the binaries are there, else $BASE_DIR/bin.
func FindBinDir(l layout.Layout) (string, error) {
	var tried []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		d := filepath.Dir(exe)
		if hasRoleBinaries(d) {
			return d, nil
		}
		tried = append(tried, d)
	}
	if hasRoleBinaries(l.Bin()) {
		return l.Bin(), nil
	}
	tried = append(tried, l.Bin())
	return "", fmt.Errorf("role binaries (sentinel, king, envoy, chamberlain, general, soldier-spawn) not found in %s; run `make build` or copy them to %s", strings.Join(tried, " or "), l.Bin())
}

func hasRoleBinaries(dir string) bool {
	for _, b := range append(append([]string{}, CoreRoles...), "general", "soldier-spawn") {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}
