// Command king routes events to generals (SPEC §4.4): admission control,
// dispatch, results, retries, resumes, schedules and petitions.
//
//	king [--base-dir DIR] [--once] [--standby]
package main

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/king"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() {
	cmd := &cli.Command{
		Name:  "king",
		Usage: "route events to generals, create tasks, process results",
		Flags: app.RoleFlags(),
		Action: func(ctx context.Context, c *cli.Command) error {
			env, err := app.Setup(layout.RoleKing, c)
			if err != nil {
				return err
			}
			env.SetStoreOpener(open.Store)
			cfg, err := config.LoadKing(env.Layout.ConfigFile(config.KingFile))
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			// The disk threshold lives with the other thresholds; a bad
			// chamberlain.yaml is the chamberlain's to report.
			minFree := config.DefaultChamberlain().Thresholds.DiskMinFreeGB
			if ch, err := config.LoadChamberlain(env.Layout.ConfigFile(config.ChamberlainFile)); err == nil {
				minFree = ch.Thresholds.DiskMinFreeGB
			}
			// SPEC §12.1: the queues, small state, results and event log live
			// in the store; the king leads by its lease.
			st, err := app.OpenStore(ctx, env.Store)
			if err != nil {
				return err
			}
			o := king.Options{
				Layout: env.Layout, Store: st, Host: env.HostID, Takeover: env.System.Store.Takeover(),
				Config: cfg, Log: env.Log, Events: env.Events, Clock: env.Clock, DiskMinFreeGB: minFree,
			}
			k, err := king.New(o)
			if err != nil {
				return err
			}
			opts := env.RunnerOptions(c)
			opts.Interval = min(cfg.EventsInterval(), cfg.ResultsInterval())
			opts.Watches = king.Watches(env.Layout)
			err = runner.Run(ctx, opts, k)
			if cerr := k.Close(); cerr != nil {
				env.Log.Warn("end the king", "err", cerr)
			}
			return err
		},
	}
	app.Main(cmd)
}

var _ runner.Role = (*king.King)(nil)
