// Command start is the kingdom's launcher and watchdog (what the systemd
// unit runs), with the operator's subcommands (stop, status, doctor, pause,
// resume, unpark, tasks, events, hosts, restart, task cancel).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	configfiles "github.com/kingdom-dev/kingdom/config"
	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/start"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() {
	app.Main(&cli.Command{
		Name:  "start",
		Usage: "launch every kingdom role in tmux and keep them running",
		Flags: []cli.Flag{app.BaseDirFlag()},
		Commands: []*cli.Command{
			{Name: "stop", Usage: "stop a running installation", Flags: []cli.Flag{app.BaseDirFlag()}, Action: stopCmd},
			{Name: "status", Usage: "roles, heartbeats, queues, soldiers, health and why work waits on one screen; " +
				"exits 0 all well, 1 degraded (a general down, health yellow/orange, paused, a park, start not running), 2 down (sentinel, king, envoy or chamberlain down, or health red)",
				Flags: []cli.Flag{app.BaseDirFlag(), &cli.BoolFlag{Name: "json", Usage: "print a JSON document (with the verdict)"}}, Action: statusCmd},
			{Name: "doctor", Usage: "check prerequisites, with a fix for each failure", Flags: []cli.Flag{app.BaseDirFlag()}, Action: doctorCmd},
			{Name: "pause", Usage: "admit no new task (events wait, schedules are held); running soldiers finish", Flags: []cli.Flag{app.BaseDirFlag()},
				Action: func(ctx context.Context, c *cli.Command) error {
					return controlCmd(ctx, c, control.Request{Action: control.ActionPause})
				}},
			{Name: "resume", Usage: "lift the operator's pause and every engine's usage-limit pause (--engine: that engine's alone)",
				Flags: []cli.Flag{app.BaseDirFlag(), &cli.StringFlag{Name: "engine", Usage: "lift only this engine's usage-limit pause (claude, codex)"}},
				Action: func(ctx context.Context, c *cli.Command) error {
					return controlCmd(ctx, c, control.Request{Action: control.ActionResume, Engine: c.String("engine")})
				}},
			{Name: "unpark", Usage: "lift a breaker's park now: a general's (its canary is not awaited) or a source item's (its window is not awaited)",
				ArgsUsage: operator.UnparkUsage, Flags: []cli.Flag{app.BaseDirFlag()}, Action: unparkCmd},
			{Name: "tasks", Usage: "list tasks: state, general, attempt, age, cost (finished ones of the last 24 h)", Flags: []cli.Flag{
				app.BaseDirFlag(),
				&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
				&cli.BoolFlag{Name: "all", Usage: "include every finished task"},
			}, Action: tasksCmd},
			{Name: "events", Usage: "list the events waiting in the queue (pending, petitioning) and why they wait", Flags: []cli.Flag{
				app.BaseDirFlag(),
				&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
			}, Action: eventsCmd, Commands: []*cli.Command{
				{Name: "cancel", Usage: "cancel a waiting event (not supported yet)", ArgsUsage: "<event-id>", Flags: []cli.Flag{app.BaseDirFlag()}, Action: eventCancelCmd},
			}},
			{Name: "hosts", Usage: "list the store's hosts: last renewal, alive, lost past store.takeover_seconds, version", Flags: []cli.Flag{app.BaseDirFlag()},
				Action: hostsCmd, Commands: []*cli.Command{
					{Name: "forget", Usage: "retire a host that has stopped: remove it from the registry (a lost host is a problem of the verdict until then)",
						ArgsUsage: "<host-id>", Flags: []cli.Flag{app.BaseDirFlag()}, Action: forgetHostCmd},
				}},
			{Name: "restart", Usage: "stop one role's session so the watchdog relaunches it", ArgsUsage: "<role>", Flags: []cli.Flag{app.BaseDirFlag()}, Action: restartCmd},
			{Name: "task", Usage: "act on one task", Commands: []*cli.Command{
				{Name: "cancel", Usage: "cancel a pending or running task (its soldier's processes are killed); it ends failed/Cancelled, never retried",
					ArgsUsage: "<task-id>", Flags: []cli.Flag{app.BaseDirFlag()}, Action: cancelCmd},
			}},
		},
		Action: run,
	})
}

func run(ctx context.Context, c *cli.Command) error {
	env, err := app.Setup(layout.RoleStart, c)
	if err != nil {
		return err
	}
	env.SetStoreOpener(open.Store)
	created, err := config.Install(configfiles.FS, env.Layout.ConfigDir())
	if err != nil {
		return fmt.Errorf("install default config: %w", err)
	}
	for _, f := range created {
		env.Log.Info("installed default config file", "path", f)
	}
	leader, err := lockfile.TryLeader(env.Layout.LeaderLock(layout.RoleStart))
	var held *lockfile.HeldError
	if errors.As(err, &held) {
		return fmt.Errorf("already running (pid %d): see `start status`, `start stop`: %w", held.PID, err)
	}
	if err != nil {
		return err
	}
	defer leader.Release()
	if _, err := start.RecordSocket(env.Layout, env.Tmux); err != nil {
		return err
	}
	if err := start.RecordHostID(env.Layout, env.HostID); err != nil {
		return err
	}
	if err := start.PublishSecrets(env.Layout, env.Secrets); err != nil {
		return &app.ConfigError{Err: err}
	}
	binDir, err := start.FindBinDir(env.Layout)
	if err != nil {
		return err
	}
	env.Log.Info("store", "kind", env.System.Store.Kind, "host", env.HostID)
	// start's own store for the host lease: reopened with the DSN as it
	// is when kingdom.env changes.
	host := start.Host{ID: env.HostID, Version: app.Version, Started: time.Now(),
		Open: func(ctx context.Context) (store.Store, error) { return open.Store(ctx, env.System.Store, env.Layout) },
		Reload: func() error {
			s, err := start.ReloadSecrets(env.Layout.EnvFile(), env.Secrets)
			env.Secrets = s
			return err
		}}
	w, err := start.New(start.Options{Layout: env.Layout, BinDir: binDir, Tmux: env.Tmux, Log: env.Log, Events: env.Events, Journal: os.Stdout,
		Store: env.Store, Host: host})
	if err != nil {
		return &app.ConfigError{Err: err}
	}
	return w.Run(ctx)
}

func stopCmd(ctx context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	held, pid := lockfile.Held(l.LeaderLock(layout.RoleStart))
	if held && pid > 0 {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("signal start (pid %d): %w", pid, err)
		}
		fmt.Printf("sent SIGTERM to start (pid %d), waiting for the roles to stop…\n", pid)
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if h, _ := lockfile.Held(l.LeaderLock(layout.RoleStart)); !h {
				fmt.Println("stopped")
				return nil
			}
			time.Sleep(100 * time.Millisecond) // polling a real process
		}
		return errors.New("start did not exit within 2 minutes")
	}
	// No start running: stop any role sessions left behind, and say which.
	tc := app.Tmux(l)
	fmt.Printf("start is not running; stopping any role sessions left on tmux socket %s\n", tc.Path())
	stopped, err := start.StopRoles(ctx, tc, 10*time.Second, logging.Discard())
	for _, s := range stopped {
		fmt.Printf("stopped %s (pid %d)\n", s.Name, s.PID)
	}
	if err != nil {
		return err
	}
	if len(stopped) == 0 {
		fmt.Printf("no role session on tmux socket %s\n", tc.Path())
	}
	return nil
}

func statusCmd(ctx context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	if _, err := os.Stat(l.Base); err != nil {
		return fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", l.Base)
	}
	now := time.Now()
	st, err := operator.ReadStatus(ctx, l, app.Tmux(l), now)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := printJSON(c, st.Document(now)); err != nil {
			return err
		}
	} else {
		st.Print(c.Root().Writer)
	}
	if code := st.Verdict().Exit; code != 0 {
		return &app.CodeError{Code: code}
	}
	return nil
}

// controlCmd drops a control request for the king (SPEC §10.11) and prints
// its answer.
func controlCmd(ctx context.Context, c *cli.Command, req control.Request) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	if _, err := os.Stat(l.Base); err != nil {
		return fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", l.Base)
	}
	// A request file root created would be unreadable to the king.
	if err := app.CheckOwner(l.Base); err != nil {
		return err
	}
	rep, err := operator.Control(ctx, l, req, operator.ControlWait)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Root().Writer, rep.Message)
	if !rep.OK {
		return &app.CodeError{Code: 1}
	}
	return nil
}

func cancelCmd(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: start task cancel <task-id>")}
	}
	return controlCmd(ctx, c, control.Request{Action: control.ActionCancel, TaskID: c.Args().First()})
}

func unparkCmd(ctx context.Context, c *cli.Command) error {
	req, err := operator.UnparkRequest(c.Args().Slice())
	if err != nil {
		return &app.CodeError{Code: app.ExitUsage, Err: err}
	}
	return controlCmd(ctx, c, req)
}

func tasksCmd(ctx context.Context, c *cli.Command) error {
	window := operator.RecentWindow
	if c.Bool("all") {
		window = 0
	}
	sh, err := openShared(ctx, c)
	if err != nil {
		return err
	}
	defer sh.Close()
	rows, err := operator.ListTasks(ctx, sh, time.Now(), window)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if rows == nil {
			rows = []operator.TaskRow{}
		}
		return printJSON(c, rows)
	}
	p, _ := control.ReadPause(ctx, sh.KV)
	return operator.PrintTasks(c.Root().Writer, rows, p)
}

func doctorCmd(ctx context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	// What the roles will see: this shell's environment, then what the
	// running start was given (its secrets file, when readable), then
	// kingdom.env.
	secrets := operator.LoadSecrets(l)
	binDir, _ := start.FindBinDir(l)
	if n := operator.PrintChecks(os.Stdout, operator.Doctor(ctx, l, binDir, secrets)); n > 0 {
		return &app.CodeError{Code: 1, Err: fmt.Errorf("%d check(s) failed", n)}
	}
	return nil
}

func printJSON(c *cli.Command, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.Root().Writer, string(b))
	return err
}

// openShared opens the shared state of the installation at --base-dir.
func openShared(ctx context.Context, c *cli.Command) (*operator.Shared, error) {
	l, err := installation(c)
	if err != nil {
		return nil, err
	}
	return operator.OpenShared(ctx, l)
}

// installation is the layout of --base-dir, which must exist.
func installation(c *cli.Command) (layout.Layout, error) {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	if _, err := os.Stat(l.Base); err != nil {
		return l, fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", l.Base)
	}
	return l, nil
}

func eventsCmd(ctx context.Context, c *cli.Command) error {
	sh, err := openShared(ctx, c)
	if err != nil {
		return err
	}
	defer sh.Close()
	now := time.Now()
	rows, err := operator.ListEvents(ctx, sh, now)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if rows == nil {
			rows = []operator.EventRow{}
		}
		return printJSON(c, rows)
	}
	return operator.PrintEvents(c.Root().Writer, rows, now)
}

// eventCancelCmd asks the king to withdraw an event not yet dispatched
// (control action cancel_event); once dispatched, its task is what to
// cancel, and the king's reply names it (exit 1).
func eventCancelCmd(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: start events cancel <event-id>")}
	}
	if err := ids.Check(c.Args().First()); err != nil {
		return &app.CodeError{Code: app.ExitUsage, Err: fmt.Errorf("event id: %w", err)}
	}
	return controlCmd(ctx, c, control.Request{Action: control.ActionCancelEvent, EventID: c.Args().First()})
}

func restartCmd(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: start restart <role>")}
	}
	l, err := installation(c)
	if err != nil {
		return err
	}
	sys, err := config.LoadSystem(l.ConfigFile(config.SystemFile))
	if err != nil {
		return &app.ConfigError{Err: err}
	}
	role, tc := c.Args().First(), app.Tmux(l)
	old, err := operator.RestartRole(ctx, l, tc, role, sys.StopGrace(), time.Now())
	if errors.Is(err, operator.ErrUnknownRole) {
		return &app.CodeError{Code: app.ExitUsage, Err: err}
	}
	if err != nil {
		return err
	}
	w := c.Root().Writer
	fmt.Fprintf(w, "stopped %s (pid %d); waiting for the watchdog to relaunch it (its round is every %s)…\n", role, old.PID, sys.WatchdogInterval())
	s, ok := operator.WaitRelaunch(ctx, tc, role, old, sys.WatchdogInterval()+10*time.Second)
	if !ok {
		return fmt.Errorf("%s was not relaunched within %s: see `start status` and logs/system.log", role, sys.WatchdogInterval()+10*time.Second)
	}
	fmt.Fprintf(w, "relaunched %s (pid %d)\n", role, s.PID)
	return nil
}

func hostsCmd(ctx context.Context, c *cli.Command) error {
	sh, err := openShared(ctx, c)
	if err != nil {
		return err
	}
	defer sh.Close()
	hs, err := operator.ReadHosts(ctx, sh)
	if err != nil {
		return err
	}
	operator.PrintHosts(c.Root().Writer, hs)
	return nil
}

func forgetHostCmd(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: start hosts forget <host-id>")}
	}
	sh, err := openShared(ctx, c)
	if err != nil {
		return err
	}
	defer sh.Close()
	id := c.Args().First()
	if err := operator.ForgetHost(ctx, sh, id); err != nil {
		return err
	}
	fmt.Fprintf(c.Root().Writer, "forgot host %s\n", id)
	return nil
}
