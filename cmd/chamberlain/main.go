// Command chamberlain keeps the kingdom healthy (SPEC §4.8): it runs as a
// daemon in the chamberlain tmux session, or checks once with --once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/chamberlain"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() { app.Main(command()) }

func command() *cli.Command {
	return &cli.Command{
		Name:  "chamberlain",
		Usage: "watch resources, heartbeats, sessions and internal events; alert, recover, rotate and clean",
		Flags: append(app.RoleFlags(),
			&cli.BoolFlag{Name: "json", Usage: "with --once: print the resources document and its verdict instead of the table"},
		),
		Description: chamberlain.ExitCodesHelp,
		Action:      run,
		// Exit codes are decided by app.Main alone; cli's own handler would
		// print "exit 2" and exit first.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
}

func loadConfig(l layout.Layout) (chamberlain.Config, error) {
	c, err := config.LoadChamberlain(l.ConfigFile(config.ChamberlainFile))
	if err != nil {
		return chamberlain.Config{}, &app.ConfigError{Err: err}
	}
	k, err := config.LoadKing(l.ConfigFile(config.KingFile))
	if err != nil {
		return chamberlain.Config{}, &app.ConfigError{Err: err}
	}
	s, err := config.LoadSystem(l.ConfigFile(config.SystemFile))
	if err != nil {
		return chamberlain.Config{}, &app.ConfigError{Err: err}
	}
	return chamberlain.Config{Chamberlain: c, MaxSoldiers: k.Concurrency.MaxSoldiers, WatchdogInterval: s.WatchdogInterval(), Budget: k.Budget,
		SelfFence: s.Store.SelfFence(), Takeover: s.Store.Takeover(), LeaderStall: s.Store.LeaderStall()}, nil
}

func run(ctx context.Context, cmd *cli.Command) error {
	if cmd.Bool("once") {
		return once(ctx, cmd)
	}
	env, err := app.Setup(layout.RoleChamberlain, cmd)
	if err != nil {
		return err
	}
	env.SetStoreOpener(open.Store)
	cfg, err := loadConfig(env.Layout)
	if err != nil {
		return err
	}
	// SPEC §11.7: resources, heartbeats and hung roles stay per host;
	// alerts, reports and retention run where the chamberlain-cluster
	// lease is held.
	st, err := app.OpenStore(ctx, env.Store)
	if err != nil {
		return err
	}
	deps := chamberlain.Deps{
		Clock: env.Clock, Metrics: chamberlain.NewSystemMetrics(env.Layout.Base),
		Tmux: env.Tmux, Events: env.Events, Log: env.Log, Store: st, Host: env.HostID,
	}
	role, err := chamberlain.New(env.Layout, cfg, deps, chamberlain.ModeDaemon)
	if err != nil {
		return err
	}
	defer role.Close()
	served, err := dashboardRole(env, cfg, role, st)
	if err != nil {
		return err
	}
	opts := env.RunnerOptions(cmd)
	opts.Interval = cfg.Chamberlain.MonitoringInterval()
	return runner.Run(ctx, opts, served)
}

// once prints one check. Beside a running daemon (it holds the leader lock)
// it only reads; otherwise it takes the lock for the check and also
// refreshes resources.json and consumes internal events. It never kills,
// restarts, cleans or alerts (SPEC §9.26).
func once(ctx context.Context, cmd *cli.Command) error {
	// Exit 3 when the kingdom cannot be evaluated (SPEC §10.12): no
	// installation (and --once creates none), or a configuration that does
	// not load.
	unknown := func(err error) error {
		return &app.CodeError{Code: chamberlain.VerdictUnknown, Err: fmt.Errorf("cannot evaluate: %v", err)}
	}
	base := layout.ResolveBase(cmd.String("base-dir"))
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		return unknown(fmt.Errorf("no installation at %s (use --base-dir or KINGDOM_BASE_DIR)", base))
	}
	// Log lines would garble the table: they go to logs/system.log only.
	env, err := app.SetupWith(layout.RoleChamberlain, base, io.Discard)
	if err != nil {
		return unknown(err)
	}
	env.SetStoreOpener(open.Store)
	cfg, err := loadConfig(env.Layout)
	if err != nil {
		return unknown(err)
	}
	l := env.Layout
	// The store opens on first use: a check that reads nothing from it
	// opens nothing.
	deps := chamberlain.Deps{
		Clock: env.Clock, Metrics: chamberlain.NewSystemMetrics(l.Base),
		Tmux: env.Tmux, Events: env.Events, Log: env.Log, Store: env.Store, Host: env.HostID,
	}
	var rep *chamberlain.Report
	var tickErr error
	held, _ := lockfile.Held(l.LeaderLock(layout.RoleChamberlain))
	// In another user's tree (a root shell) only read: a lock or state
	// file created here would belong to the wrong user.
	held = held || env.ReadOnly
	var leader *lockfile.Leader
	if !held {
		leader, err = lockfile.TryLeader(l.LeaderLock(layout.RoleChamberlain))
		var he *lockfile.HeldError
		if errors.As(err, &he) {
			held = true
		} else if err != nil {
			return err
		}
	}
	if held {
		deps.Log = slog.New(slog.DiscardHandler) // a reader writes nothing, not even logs
		// The daemon's fresh sample answers at once (no 1 s CPU window).
		deps.Metrics = &chamberlain.DaemonMetrics{Sys: chamberlain.NewSystemMetrics(l.Base),
			ResourcesPath: l.Resources(), MaxAge: 2 * cfg.Chamberlain.MonitoringInterval(), Clock: env.Clock}
		rep, tickErr = chamberlain.Check(ctx, l, cfg, deps)
	} else {
		defer leader.Release()
		role, err := chamberlain.New(l, cfg, deps, chamberlain.ModeOnce)
		if err != nil {
			return unknown(err)
		}
		tickErr = role.Tick(ctx)
		role.Close()
		rep = role.Last
	}
	if tickErr != nil && rep != nil && rep.MetricsErr == nil {
		fmt.Fprintf(os.Stderr, "chamberlain: %v\n", tickErr)
	}
	v := rep.Verdict()
	if cmd.Bool("json") {
		if rep == nil || rep.Resources == nil {
			return &app.CodeError{Code: chamberlain.VerdictUnknown, Err: fmt.Errorf("cannot evaluate health: %v", tickErr)}
		}
		// The resources document with the kingdom's verdict beside it
		// (schemas/check.json), so a monitor reads the same truth as the
		// exit code.
		b, err := json.MarshalIndent(struct {
			*chamberlain.Resources
			Verdict chamberlain.Verdict `json:"verdict"`
		}{rep.Resources, v}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.Root().Writer, string(b))
		for _, p := range v.Problems {
			fmt.Fprintln(os.Stderr, "chamberlain:", p)
		}
	} else if rep != nil {
		if err := rep.Table(cmd.Root().Writer); err != nil {
			return err
		}
	}
	if v.Exit != 0 {
		return &app.CodeError{Code: v.Exit}
	}
	return nil
}
