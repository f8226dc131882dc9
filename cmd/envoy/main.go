// Command envoy is Kingdom's Slack role (Socket Mode in, Web API out;
// console mode without tokens), `envoy reply <task-id> "text"`, which
// plays a human's answer in a task's thread, `envoy dm "text"`, and
// `envoy retry <msg-id>`, which sends a failed message again.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/envoy"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

func main() {
	app.Main(&cli.Command{
		Name:  "envoy",
		Usage: "Kingdom's voice in Slack (console mode without tokens)",
		Flags: app.RoleFlags(),
		Commands: []*cli.Command{{
			Name:      "reply",
			Usage:     "answer a task's question as if replying in its Slack thread",
			ArgsUsage: "<task-id> <text>",
			Flags:     []cli.Flag{app.BaseDirFlag()},
			Action:    reply,
		}, {
			Name:      "dm",
			Usage:     "send the bot a direct message as if in Slack (console mode: the answer lands in logs/envoy-console.log)",
			ArgsUsage: "<text>",
			Flags:     []cli.Flag{app.BaseDirFlag()},
			Action:    dm,
		}, {
			Name:      "retry",
			Usage:     "send a failed message again (moves it from messages/failed/ back to pending/)",
			ArgsUsage: "<msg-id>",
			Flags:     []cli.Flag{app.BaseDirFlag()},
			Action:    retry,
		}},
		Action: run,
	})
}

// build makes the envoy over the store (SPEC §12.1): messages, deliveries
// and the envoy's state live there; the envoy leads by its lease.
func build(ctx context.Context, env *app.Env) (*envoy.Envoy, *config.Envoy, error) {
	path := env.Layout.ConfigFile("envoy.yaml")
	cfg, err := config.LoadEnvoy(path)
	if err != nil {
		return nil, nil, &app.ConfigError{Err: err}
	}
	st, err := app.OpenStore(ctx, env.Store)
	if err != nil {
		return nil, nil, err
	}
	e, err := envoy.New(envoy.Options{
		Layout: env.Layout, Store: st, Host: env.HostID, CallTimeout: env.System.Store.CallTimeout(),
		Config: cfg, Log: env.Log, Events: env.Events, Clock: env.Clock,
		BotToken: os.Getenv(cfg.Slack.BotTokenEnv), AppToken: os.Getenv(cfg.Slack.AppTokenEnv),
		ConfigPath: path,
	})
	if err != nil {
		return nil, nil, &app.ConfigError{Err: err}
	}
	return e, cfg, nil
}

func run(ctx context.Context, c *cli.Command) error {
	env, err := app.Setup(layout.RoleEnvoy, c)
	if err != nil {
		return err
	}
	env.SetStoreOpener(open.Store)
	e, cfg, err := build(ctx, env)
	if err != nil {
		return err
	}
	opts := env.RunnerOptions(c)
	opts.Interval = cfg.OutboundInterval()
	opts.Watches = e.Watches()
	return runner.Run(ctx, opts, e)
}

func reply(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 2 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New(`usage: envoy reply <task-id> "text"`)}
	}
	return deliverConsole(ctx, c, "reply", "slack.thread.reply", func(env *app.Env) (string, error) {
		return envoy.QueueReply(env.Layout, c.Args().Get(0), c.Args().Get(1), env.Clock.Now())
	})
}

func dm(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New(`usage: envoy dm "text"`)}
	}
	return deliverConsole(ctx, c, "dm", "slack.channel.message", func(env *app.Env) (string, error) {
		return envoy.QueueDM(env.Layout, c.Args().Get(0), env.Clock.Now())
	})
}

func retry(ctx context.Context, c *cli.Command) error {
	if c.Args().Len() != 1 {
		return &app.CodeError{Code: app.ExitUsage, Err: errors.New("usage: envoy retry <msg-id>")}
	}
	id := c.Args().Get(0)
	if err := ids.Check(id); err != nil {
		return &app.CodeError{Code: app.ExitUsage, Err: fmt.Errorf("envoy retry: message id: %w", err)}
	}
	env, err := app.Setup(layout.RoleEnvoy, c)
	if err != nil {
		return err
	}
	env.SetStoreOpener(open.Store)
	st, err := app.OpenStore(ctx, env.Store)
	if err != nil {
		return err
	}
	if err := envoy.RetryFailed(st, env.Layout, id, env.Events); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "message %s queued again; the envoy sends it at its next tick\n", id)
	return nil
}

// deliverConsole queues a console envelope and, when no envoy runs, handles
// it here.
func deliverConsole(ctx context.Context, c *cli.Command, what, eventType string, queueIt func(*app.Env) (string, error)) error {
	env, err := app.Setup(layout.RoleEnvoy, c)
	if err != nil {
		return err
	}
	env.SetStoreOpener(open.Store)
	e, _, err := build(ctx, env)
	if err != nil {
		return err
	}
	path, err := queueIt(env)
	if err != nil {
		return err
	}
	// With an envoy running, it picks the envelope up (inotify). Without one,
	// take its lease and handle the inbox here so the reply is not left
	// waiting for the next start.
	lease, err := env.Store.Lead(ctx, layout.RoleEnvoy)
	if errors.Is(err, store.ErrHeld) {
		fmt.Fprintf(os.Stdout, "%s queued (%s); the running envoy delivers it\n", what, path)
		return nil
	}
	if err != nil {
		return err
	}
	defer lease.Release()
	e.UseLease(lease)
	if err := e.ProcessConsoleInbox(ctx); err != nil {
		return err
	}
	if reason, rejected := envoy.ReplyRejection(path); rejected {
		return fmt.Errorf("%s not delivered: %s", what, reason)
	}
	if _, statErr := os.Stat(path); statErr == nil {
		return fmt.Errorf("%s %s still queued", what, path)
	}
	fmt.Fprintf(os.Stdout, "%s delivered as a %s event\n", what, eventType)
	return nil
}
