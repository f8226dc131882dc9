// Command sentinel watches GitHub notifications, Jira tickets and inbox/ and
// turns what it finds into events in queue/events/pending (SPEC §4.3).
//
//	sentinel [--base-dir B] [--once] [--standby]
//
// Watchers are the keys under polling: in config/sentinel.yaml.
package main

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/sentinel"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() {
	cmd := &cli.Command{
		Name:  "sentinel",
		Usage: "watch GitHub, Jira and inbox/ and queue events",
		Flags: app.RoleFlags(),
		Action: func(ctx context.Context, c *cli.Command) error {
			env, err := app.Setup(layout.RoleSentinel, c)
			if err != nil {
				return err
			}
			env.SetStoreOpener(open.Store)
			cfg, err := config.LoadSentinel(env.Layout.ConfigFile("sentinel.yaml"))
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			// SPEC §11.7: this host's inbox admits into the store's events
			// queue and seen index; the pollers take the store's lease.
			st, err := app.OpenStore(ctx, env.Store)
			if err != nil {
				return err
			}
			s, err := sentinel.New(cfg, sentinel.Options{
				Layout: env.Layout, Log: env.Log, Events: env.Events, Clock: env.Clock,
				Store: st, Host: env.HostID, LeaderStall: env.System.Store.LeaderStall(),
			})
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			defer s.Close() // hands the pollers' lease on at once
			env.Log.Info("watchers enabled", "watchers", s.Watchers(), runner.CatAttr("SYSTEM"))
			opts := env.RunnerOptions(c)
			opts.Interval = s.RunnerInterval()
			opts.Watches = s.Watches()
			return runner.Run(ctx, opts, s)
		},
	}
	app.Main(cmd)
}
