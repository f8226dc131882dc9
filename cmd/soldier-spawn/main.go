// Command soldier-spawn runs one task attempt in its own tmux session
// (SPEC §4.6) and the king's petition classifier (§9.21).
//
//	soldier-spawn --task ID --general G --prompt FILE --workdir DIR [--resume T] [--engine E] [--soldier-id S]
//	soldier-spawn run …        (the command inside the soldier session)
//	soldier-spawn petition --event ID --prompt FILE --out FILE [--timeout-seconds N]
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/soldier"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

func taskFlags() []cli.Flag {
	return []cli.Flag{
		app.BaseDirFlag(),
		&cli.StringFlag{Name: "task", Usage: "task id"},
		&cli.StringFlag{Name: "general", Usage: "the general running the task"},
		&cli.StringFlag{Name: "prompt", Usage: "prompt file"},
		&cli.StringFlag{Name: "workdir", Usage: "working directory of the engine"},
		&cli.StringFlag{Name: "resume", Usage: "engine resume token (session id)"},
		&cli.StringFlag{Name: "engine", Usage: "claude | codex | command (default: system.yaml runtime.engine)"},
		&cli.StringFlag{Name: "soldier-id", Usage: "soldier id / tmux session name (default: a fresh soldier-<unix>-<rand>)"},
	}
}

func params(c *cli.Command) spawn.Params {
	return spawn.Params{
		BaseDir: layout.ResolveBase(c.String("base-dir")), TaskID: c.String("task"), General: c.String("general"),
		PromptFile: c.String("prompt"), Workdir: c.String("workdir"), SoldierID: c.String("soldier-id"),
		Resume: c.String("resume"), Engine: c.String("engine"),
	}
}

func loadSystem(base string) (*config.System, error) {
	l := layout.New(base)
	sys, err := config.LoadSystem(l.ConfigFile(config.SystemFile))
	if err != nil {
		return nil, &app.ConfigError{Err: err}
	}
	redact.SetExtraNames(config.SecretEnvNamesWith(sys, l.ConfigDir()))
	// As every role: the soldier's own environment, then what start was
	// given, then kingdom.env (SPEC §11.4).
	if _, err := config.ApplySecrets(l.StartSecretsFile(), l.EnvFile(), redact.IsSecretName); err != nil {
		return nil, &app.ConfigError{Err: err}
	}
	return sys, nil
}

// runTask is `soldier-spawn run`: the engine for one task attempt. A stop
// signal ends it by default, except while its engine runs, when it ends the
// engine's group; nothing is published either way: whoever stopped the
// soldier decides its result.
func runTask(ctx context.Context, p spawn.Params) error {
	// The soldier's own words go to its pane (tmux attach), beside the
	// engine's, which go to logs/sessions/.
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	sys, err := loadSystem(p.BaseDir)
	if err != nil {
		// Leave a result so the task does not wait for a timeout, but
		// never run the engine on defaults.
		if perr := soldier.PublishConfigFailure(ctx, p.BaseDir, p.TaskID, err, log); perr != nil {
			return perr
		}
		return err
	}
	out, rerr := soldier.Run(ctx, soldier.RunOptions{Params: p, System: sys, Environ: os.Environ(), Log: log})
	if rerr != nil {
		return rerr
	}
	fmt.Printf("%s: %v\n", p.TaskID, out.Raw["status"])
	return nil
}

func main() { app.Main(newCommand(runTask)) }

// newCommand is soldier-spawn's command tree; run is what `soldier-spawn
// run` does with the task it names.
func newCommand(run func(context.Context, spawn.Params) error) *cli.Command {
	return &cli.Command{
		Name:  "soldier-spawn",
		Usage: "run one task attempt in its own tmux session",
		Flags: taskFlags(),
		Action: func(ctx context.Context, c *cli.Command) error {
			p := params(c)
			l := layout.New(p.BaseDir)
			s, err := spawn.Launch(ctx, app.Tmux(l), spawn.FindBinary(l), p, nil)
			if err != nil {
				return err
			}
			fmt.Println(s.ID)
			return nil
		},
		Commands: []*cli.Command{
			{
				Name:  "run",
				Usage: "run the engine for the task (the soldier session's command)",
				Flags: taskFlags(),
				Action: func(ctx context.Context, c *cli.Command) error {
					return run(ctx, params(c))
				},
			},
			{
				Name:  "petition",
				Usage: "classify an event for the king; writes {general} or {direct_response} (or {error}) to --out",
				Flags: []cli.Flag{
					app.BaseDirFlag(),
					&cli.StringFlag{Name: "event", Usage: "event id", Required: true},
					&cli.StringFlag{Name: "prompt", Usage: "prompt file", Required: true},
					&cli.StringFlag{Name: "out", Usage: "result file", Required: true},
					&cli.IntFlag{Name: "timeout-seconds", Usage: "hard limit (default king.yaml petition.timeout_seconds)"},
				},
				Action: func(ctx context.Context, c *cli.Command) error {
					base := layout.ResolveBase(c.String("base-dir"))
					l := layout.New(base)
					sys, err := loadSystem(base)
					if err != nil {
						return err
					}
					king, err := config.LoadKing(l.ConfigFile(config.KingFile))
					if err != nil {
						return &app.ConfigError{Err: err}
					}
					to := king.PetitionTimeout()
					if n := c.Int("timeout-seconds"); n > 0 {
						to = time.Duration(n) * time.Second
					}
					return soldier.Petition(ctx, soldier.PetitionOptions{
						BaseDir: base, EventID: c.String("event"), PromptFile: c.String("prompt"), Out: c.String("out"),
						Timeout: to, Models: king.Petition.ModelFor, System: sys, Environ: os.Environ(),
					})
				},
			},
		},
	}
}
