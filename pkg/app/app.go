// Package app is the common bootstrap of every kingdom binary: the shared
// flags, resolving the base dir, creating the tree, loading kingdom.env,
// building the logger, the internal event emitter and the tmux client, and
// opening the store of system.yaml (Env.Store, SPEC §11.6), and mapping
// errors to exit codes in one place (SPEC §9.32: a refused leader lock or
// lease exits 4, a config error 2, a lost lease 5).
//
// A cmd/<role>/main.go only wires:
//
//	cmd := &cli.Command{Name: "king", Flags: app.RoleFlags(), Action: func(ctx context.Context, c *cli.Command) error {
//		env, err := app.Setup(layout.RoleKing, c)
//		...
//		return runner.Run(ctx, env.RunnerOptions(c, ...), role)
//	}}
//	app.Main(cmd)
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// Exit codes shared by every binary.
const (
	ExitOK         = 0
	ExitError      = 1
	ExitConfig     = 2
	ExitLeaderHeld = 4
	// ExitLeadershipLost: the role's lease (store.kind postgres) was lost
	// while it ran (runner.ErrLeadershipLost). start relaunches it at once
	// in standby and does not count it toward the crash-loop guard.
	ExitLeadershipLost = 5
)

// Env is what a role needs from its surroundings.
type Env struct {
	// Secrets maps each secret variable's name to where its value came
	// from (config.Source*); never values.
	Secrets map[string]string
	Role    string
	Layout  layout.Layout
	Log     *slog.Logger
	Events  *eventlog.Emitter
	Tmux    *tmux.Client
	Clock   clock.Clock
	// ReadOnly is set when the base dir belongs to another user (a check
	// typed in a root shell): nothing may be created in the tree, so the
	// log goes to stdout only and Events is nil. Only a command that
	// merely reads may go on (chamberlain --once); Setup refuses.
	ReadOnly bool
	// System is system.yaml as loaded at Setup.
	System *config.System
	// Store is where the roles' shared state lives (system.yaml store): the
	// files under the base dir or PostgreSQL. It is opened on first use
	// (OpenStore opens it now) and closed when Main returns.
	Store store.Store
	// HostID names this host in claims, leaders and the hosts registry
	// (config.Store.ResolveHostID: KINGDOM_HOST_ID, else the id start
	// recorded, else system.yaml store.host_id or the hostname).
	HostID string
}

// BaseDirFlag is the --base-dir flag every binary has.
func BaseDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "base-dir", Usage: "runtime tree (default $KINGDOM_BASE_DIR, else /opt/kingdom)"}
}

// RoleFlags are the flags of a long-running role.
func RoleFlags() []cli.Flag {
	return []cli.Flag{
		BaseDirFlag(),
		&cli.BoolFlag{Name: "once", Usage: "run one tick and exit"},
		&cli.BoolFlag{Name: "standby", Usage: "wait for the leader lock and take over when the holder exits"},
	}
}

// ConfigError marks an error as a configuration problem (exit 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Setup resolves the base dir from the command's --base-dir, creates the
// tree, loads config/kingdom.env and builds the role's logger and emitter.
// Log lines go to stdout and logs/system.log. It refuses (OwnerError) when
// the base dir belongs to another user.
func Setup(role string, c *cli.Command) (*Env, error) {
	env, err := SetupWith(role, c.String("base-dir"), os.Stdout)
	if err != nil {
		return nil, err
	}
	if err := CheckOwner(env.Layout.Base); err != nil {
		return nil, err
	}
	env.Log.Info("secrets", "from", config.FormatSources(env.Secrets))
	recordExitsOf(env.Layout.LastExit(role))
	return env, nil
}

// SetupWith is Setup with an explicit base flag and stdout, for a command
// that only reads: in a tree owned by another user it returns a ReadOnly
// Env instead of refusing.
func SetupWith(role, baseFlag string, stdout io.Writer) (*Env, error) {
	l := layout.New(layout.ResolveBase(baseFlag))
	readOnly := ForeignOwner(l.Base) != ""
	if !readOnly {
		if err := l.Ensure(); err != nil {
			return nil, err
		}
	}
	// system.yaml names the store; a role must never guess it (a king on
	// the files of one host beside a cluster's would be a second king), so
	// a system.yaml that does not load is a config error for every role.
	sys, sysErr := config.LoadSystem(l.ConfigFile(config.SystemFile))
	// runtime.secret_env, the DSN's variable, the dashboard's token
	// variable and the envoy's join the redactor's names (SPEC §10.14), so
	// start's tmux server never holds them either.
	redact.SetExtraNames(config.SecretEnvNamesWith(sys, l.ConfigDir()))
	if sysErr != nil {
		return nil, &ConfigError{Err: sysErr}
	}
	// Roles run in tmux sessions that carry the server's environment, not
	// start's, so each loads its secrets itself (SPEC §11.4): its own
	// environment wins, then what start was given (the start secrets file),
	// then kingdom.env. start itself reads only its environment and
	// kingdom.env, and publishes the former for its roles.
	startEnv := l.StartSecretsFile()
	if role == layout.RoleStart {
		startEnv = ""
	}
	secrets, err := config.ApplySecrets(startEnv, l.EnvFile(), redact.IsSecretName)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	// The roles and every operator command take the host id start
	// resolved and recorded (KINGDOM_HOST_ID still wins): a role in a
	// tmux session or an operator's shell may lack the unit's environment.
	tc := Tmux(l)
	if role == layout.RoleStart {
		tc = startTmux(l)
	} else {
		sys.Store.HostIDFile = config.HostIDRecord(l.StateDir())
	}
	host, err := storeConfig(sys.Store)
	if err != nil {
		return nil, err
	}
	atomicfile.SetRole(role)
	lo := logging.Options{Role: role, Stdout: stdout, SystemLog: l.SystemLog(), RotateLock: l.RotateLock(), Level: logLevel()}
	sys.Store.AppName = "kingdom-" + role + "@" + host
	sys.Store.ReadOnly = readOnly
	st := newLazyStore(sys.Store, l)
	// The event log is the store's: logs/events.log in files mode, a
	// table every host shares in postgres mode (SPEC §12.1).
	events := eventlog.NewStoreEmitter(st, role)
	if readOnly {
		lo.SystemLog, lo.RotateLock, events = "", "", nil
	}
	log := logging.New(lo)
	st.log = log
	if !readOnly {
		st.role = role
	}
	return &Env{
		Secrets:  secrets,
		Role:     role,
		Layout:   l,
		Log:      log,
		Events:   events,
		Tmux:     tc,
		Clock:    clock.Real{},
		ReadOnly: readOnly,
		System:   sys,
		Store:    st,
		HostID:   host,
	}, nil
}

// Close closes the store if it was opened (Main does it on exit too).
func (e *Env) Close() error { return e.Store.Close() }

// Tmux returns the tmux client of the installation for a command typed
// in any shell (`chamberlain --once`, `start status`, `start stop`) and for
// the roles: the socket start recorded when it launched the roles
// (layout.TmuxSocketFile, a path: tmux -S) unless KINGDOM_TMUX_SOCKET names
// another one. A socket name resolves under the caller's own uid, so a root
// shell that sets KINGDOM_TMUX_SOCKET as the unit does would otherwise look
// in /tmp/tmux-0/ and find no session of the kingdom user's server.
func Tmux(l layout.Layout) *tmux.Client {
	c := tmux.New()
	b, err := os.ReadFile(l.TmuxSocketFile())
	rec := strings.TrimSpace(string(b))
	if err != nil || rec == "" {
		return c
	}
	if env, set := os.LookupEnv(tmux.EnvSocket); !set || env == rec || (env != "" && filepath.Base(rec) == env) {
		c.Socket = rec
	}
	return c
}

// startTmux is start's own client: the socket its environment names
// (KINGDOM_TMUX_SOCKET), which it records for the others; with none set,
// the one recorded last.
func startTmux(l layout.Layout) *tmux.Client {
	if _, set := os.LookupEnv(tmux.EnvSocket); set {
		return tmux.New()
	}
	return Tmux(l)
}

func logLevel() slog.Level {
	switch os.Getenv("KINGDOM_LOG_LEVEL") {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// RunnerOptions returns runner options for the role with --once/--standby
// taken from the command. In postgres mode a leader role (LeaderRoles)
// leads by the store's lease instead of its lock file; a per-host role
// keeps the lock file. In postgres mode the role is also woken by the
// store's notifications that concern it (wake.go), from one listener per
// process that starts now, opens the store in the background and lasts
// until the store is closed (when Main returns).
func (e *Env) RunnerOptions(c *cli.Command) runner.Options {
	o := runner.Options{
		Role: e.Role, Layout: e.Layout, Log: e.Log, Events: e.Events,
		Once: c.Bool("once"), Standby: c.Bool("standby"),
	}
	if IsLeaderRole(e.Role) {
		role, st := e.Role, e.Store
		o.Lead = func(ctx context.Context) (store.Lease, error) { return st.Lead(ctx, role) }
		o.LeaderStall = e.System.Store.LeaderStall()
	}
	if !o.Once {
		o.Wakes = storeWakes(e.Store, e.Role)
	}
	return o
}

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var held *lockfile.HeldError
	if errors.As(err, &held) || errors.Is(err, store.ErrHeld) {
		return ExitLeaderHeld
	}
	if errors.Is(err, runner.ErrLeadershipLost) {
		return ExitLeadershipLost
	}
	var ce *ConfigError
	var cfe *config.Error
	if errors.As(err, &ce) || errors.As(err, &cfe) {
		return ExitConfig
	}
	// Only our own CodeError sets a code: a wrapped *exec.ExitError of git
	// or tmux has an ExitCode too, and must not pose as "config error" (2)
	// or "leader held" (4) to start's crash-loop guard.
	var ce2 *CodeError
	if errors.As(err, &ce2) {
		return ce2.Code
	}
	return ExitError
}

// CodeError carries an explicit exit code (e.g. chamberlain --once health).
type CodeError struct {
	Code int
	Err  error
}

func (e *CodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}
func (e *CodeError) Unwrap() error { return e.Err }
func (e *CodeError) ExitCode() int { return e.Code }

// Main runs cmd with a context cancelled by SIGTERM/SIGINT, prints a failing
// error to stderr and exits with ExitCode. It is the only os.Exit.
func Main(cmd *cli.Command) {
	Prepare(cmd)
	MainFunc(cmd.Name, func(ctx context.Context) error {
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return cmd.Run(ctx, os.Args)
	})
}

// MainFunc is Main for a command that parses its own arguments and handles
// signals itself (soldier-spawn run, once per task: each signal a process
// starts or stops watching costs the runtime a round trip to a thread of
// its own): the same profile, error report and exit code.
func MainFunc(name string, run func(ctx context.Context) error) {
	endProfile := startProfile(name)
	err := run(context.Background())
	closeStores()
	endProfile()
	code := ExitCode(err)
	if err != nil {
		var ce *CodeError
		if !errors.As(err, &ce) || ce.Err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s\n", name, logging.Redact(err.Error()))
		}
		writeLastExit(code, err)
	}
	os.Exit(code)
}
