// Command start is the kingdom's launcher and watchdog (what the systemd
// unit runs), with the subcommands stop, status and doctor.
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
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/start"
)

func main() {
	app.Main(&cli.Command{
		Name:  "start",
		Usage: "launch every kingdom role in tmux and keep them running",
		Flags: []cli.Flag{app.BaseDirFlag()},
		Commands: []*cli.Command{
			{Name: "stop", Usage: "stop a running installation", Flags: []cli.Flag{app.BaseDirFlag()}, Action: stopCmd},
			{Name: "status", Usage: "roles, heartbeats, queues, soldiers and health on one screen", Flags: []cli.Flag{app.BaseDirFlag()}, Action: statusCmd},
			{Name: "doctor", Usage: "check prerequisites, with a fix for each failure", Flags: []cli.Flag{app.BaseDirFlag()}, Action: doctorCmd},
			{Name: "pause", Usage: "admit no new task (events wait, schedules are held); running soldiers finish", Flags: []cli.Flag{app.BaseDirFlag()},
				Action: func(ctx context.Context, c *cli.Command) error {
					return controlCmd(ctx, c, control.Request{Action: control.ActionPause})
				}},
			{Name: "resume", Usage: "lift a pause", Flags: []cli.Flag{app.BaseDirFlag()},
				Action: func(ctx context.Context, c *cli.Command) error {
					return controlCmd(ctx, c, control.Request{Action: control.ActionResume})
				}},
			{Name: "tasks", Usage: "list tasks: state, general, attempt, age, cost (finished ones of the last 24 h)", Flags: []cli.Flag{
				app.BaseDirFlag(),
				&cli.BoolFlag{Name: "json", Usage: "print a JSON array"},
				&cli.BoolFlag{Name: "all", Usage: "include every finished task"},
			}, Action: tasksCmd},
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
	if err := start.PublishSecrets(env.Layout, env.Secrets); err != nil {
		return &app.ConfigError{Err: err}
	}
	binDir, err := start.FindBinDir(env.Layout)
	if err != nil {
		return err
	}
	w, err := start.New(start.Options{Layout: env.Layout, BinDir: binDir, Tmux: env.Tmux, Log: env.Log, Events: env.Events, Journal: os.Stdout})
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
	// No start running: stop any role sessions left behind.
	fmt.Println("start is not running; stopping any role sessions left on the socket")
	start.StopRoles(ctx, app.Tmux(l), 10*time.Second, app.Discard())
	return nil
}

func statusCmd(ctx context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	if _, err := os.Stat(l.Base); err != nil {
		return fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", l.Base)
	}
	st, err := start.ReadStatus(ctx, l, app.Tmux(l), time.Now())
	if err != nil {
		return err
	}
	st.Print(os.Stdout)
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
	req.By = start.Operator()
	id, err := control.Submit(l, req, time.Now())
	if err != nil {
		return err
	}
	rep, err := control.WaitReply(ctx, l, id, controlWait)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.Root().Writer, rep.Message)
	if !rep.OK {
		return &app.CodeError{Code: 1}
	}
	return nil
}

// controlWait is how long a control command waits for the king's answer.
const controlWait = 15 * time.Second

func cancelCmd(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: start task cancel <task-id>")}
	}
	return controlCmd(ctx, c, control.Request{Action: control.ActionCancel, TaskID: c.Args().First()})
}

func tasksCmd(_ context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	if _, err := os.Stat(l.Base); err != nil {
		return fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", l.Base)
	}
	window := start.RecentWindow
	if c.Bool("all") {
		window = 0
	}
	rows, err := start.ListTasks(l, time.Now(), window)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if rows == nil {
			rows = []start.TaskRow{}
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(c.Root().Writer, string(b))
		return nil
	}
	p, _ := control.ReadPause(l)
	return start.PrintTasks(c.Root().Writer, rows, p)
}

func doctorCmd(_ context.Context, c *cli.Command) error {
	l := layout.New(layout.ResolveBase(c.String("base-dir")))
	// What the roles will see: this shell's environment, then what the
	// running start was given (its secrets file, when readable), then
	// kingdom.env.
	secrets, _ := config.ApplySecrets(l.StartSecretsFile(), l.EnvFile(), redact.IsSecretName)
	binDir, _ := start.FindBinDir(l)
	if n := start.PrintChecks(os.Stdout, start.Doctor(l, binDir, secrets)); n > 0 {
		return &app.CodeError{Code: 1, Err: fmt.Errorf("%d check(s) failed", n)}
	}
	return nil
}
