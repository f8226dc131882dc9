// Command general runs one general (SPEC §4.5): `general --name gen-pr`.
// `general install PATH` and `general uninstall NAME` manage packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/general"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() {
	flags := append(app.RoleFlags(), &cli.StringFlag{Name: "name", Usage: "the general to run (its manifest name, e.g. gen-pr)"})
	cmd := &cli.Command{
		Name:  "general",
		Usage: "claim this general's tasks and run soldiers for them",
		Flags: flags,
		Action: func(ctx context.Context, c *cli.Command) error {
			name := c.String("name")
			if !ids.ValidGeneral(name) {
				return &app.ConfigError{Err: fmt.Errorf("--name: expected a general name like gen-pr, got %q", name)}
			}
			env, err := app.Setup(name, c)
			if err != nil {
				return err
			}
			env.SetStoreOpener(open.Store)
			l := env.Layout
			m, err := config.LoadManifest(l.GeneralManifest(name))
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			sys, err := config.LoadSystem(l.ConfigFile("system.yaml"))
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			king, err := config.LoadKing(l.ConfigFile(config.KingFile))
			if err != nil {
				return &app.ConfigError{Err: err}
			}
			sessEnv := map[string]string{}
			if d := os.Getenv(spawn.EnvBinDir); d != "" {
				sessEnv[spawn.EnvBinDir] = d
			}
			// Tasks are claimed from the store, fenced by this host and
			// attempt; results go back through it (SPEC §12.1).
			st, err := app.OpenStore(ctx, env.Store)
			if err != nil {
				return err
			}
			g, err := general.New(general.Options{
				Layout: l, Manifest: m, System: sys, Log: env.Log, Events: env.Events,
				Tmux: env.Tmux, Clock: env.Clock, SpawnBin: spawn.FindBinary(l), SessionEnv: sessEnv,
				HostMaxSoldiers: king.Concurrency.HostMaxSoldiers, Breaker: king.Breaker, Store: st, Host: env.HostID,
			})
			if err != nil {
				return err
			}
			opts := env.RunnerOptions(c)
			opts.Watches = g.Watches()
			return runner.Run(ctx, opts, g)
		},
		Commands: []*cli.Command{
			{
				Name:      "install",
				Usage:     "install a general package directory (manifest.yaml, prompt.md, …)",
				ArgsUsage: "PATH",
				Flags:     []cli.Flag{app.BaseDirFlag()},
				Action: func(ctx context.Context, c *cli.Command) error {
					if c.Args().Len() != 1 {
						return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: general install PATH")}
					}
					l := layout.New(layout.ResolveBase(c.String("base-dir")))
					// Installed files are 0600: written by root into the
					// kingdom user's tree, the general could not read its
					// own manifest. Refused rather than chowned afterwards,
					// which would leave a moment where the watchdog launches
					// a general that cannot read it.
					if err := app.CheckOwner(l.Base); err != nil {
						return fmt.Errorf("%w (the package must be readable by that user)", err)
					}
					name, err := general.Install(l, c.Args().First())
					if err != nil {
						return &app.ConfigError{Err: err}
					}
					fmt.Printf("installed %s (%s)\n", name, l.GeneralManifest(name))
					return nil
				},
			},
			{
				Name:      "uninstall",
				Usage:     "remove an installed general's manifest and templates",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{app.BaseDirFlag()},
				Action: func(ctx context.Context, c *cli.Command) error {
					if c.Args().Len() != 1 {
						return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: general uninstall NAME")}
					}
					l := layout.New(layout.ResolveBase(c.String("base-dir")))
					if err := general.Uninstall(l, c.Args().First()); err != nil {
						return err
					}
					// A running general session is stopped by start's watchdog
					// (it rescans manifests each round, §9.27).
					fmt.Printf("uninstalled %s\n", c.Args().First())
					return nil
				},
			},
		},
	}
	app.Main(cmd)
}
