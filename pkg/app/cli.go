package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"
)

// Version is the build's version, stamped by the Makefile with
// -ldflags "-X github.com/kingdom-dev/kingdom/pkg/app.Version=…"; "dev"
// for a plain `go build`.
var Version = "dev"

// ExitUsage is the exit code of a command line that names an unknown
// subcommand or gives arguments a command does not take.
const ExitUsage = 2

// UsageError is a bad command line (exit 2, after the usage text).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Prepare gives every binary the same command-line behaviour, whatever its
// main declares:
//   - --version on the root prints Version;
//   - a command without ArgsUsage takes no positional arguments: `start
//     frobnicate` is an unknown subcommand (usage, exit 2), never a run;
//   - a parent's own flags apply to the parent only (`envoy reply --help`
//     does not list --once); --base-dir stays inherited;
//   - exit codes are decided by Main alone (cli's handler would exit first).
func Prepare(root *cli.Command) *cli.Command {
	if root.Version == "" {
		root.Version = Version
	}
	if root.ExitErrHandler == nil {
		root.ExitErrHandler = func(context.Context, *cli.Command, error) {}
	}
	prepare(root)
	return root
}

func prepare(c *cli.Command) {
	if len(c.Commands) > 0 {
		for _, f := range c.Flags {
			setLocal(f)
		}
	}
	if c.Action == nil && len(c.Commands) > 0 {
		// A group: naming no subcommand, or an unknown one, is a usage error.
		c.Action = func(ctx context.Context, cmd *cli.Command) error {
			word := ""
			if cmd.Args().Len() > 0 {
				word = cmd.Args().First()
			}
			return usageError(cmd, word)
		}
	} else if c.Action != nil && c.ArgsUsage == "" {
		act := c.Action
		c.Action = func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError(cmd, cmd.Args().First())
			}
			return act(ctx, cmd)
		}
	}
	for _, sub := range c.Commands {
		prepare(sub)
	}
}

// usageError prints the command's usage to stderr and returns the error
// naming the unexpected word.
func usageError(cmd *cli.Command, word string) error {
	var names []string
	for _, s := range cmd.Commands {
		if !s.Hidden && s.Name != "help" {
			names = append(names, s.Name)
		}
	}
	msg := fmt.Sprintf("unknown command or argument %q", word)
	if word == "" {
		msg = "a command is required"
	}
	if len(names) > 0 {
		msg += " (commands: " + strings.Join(names, ", ") + ")"
	}
	w := cmd.Root().ErrWriter
	if w == nil {
		w = cmd.Root().Writer
	}
	if w != nil {
		tmpl := cli.CommandHelpTemplate
		switch {
		case cmd.Root() == cmd:
			tmpl = cli.RootCommandHelpTemplate
		case len(cmd.Commands) > 0:
			tmpl = cli.SubcommandHelpTemplate
		}
		cli.HelpPrinter(w, tmpl, cmd)
		fmt.Fprintln(w)
	}
	return &CodeError{Code: ExitUsage, Err: &UsageError{Msg: msg}}
}

func setLocal(f cli.Flag) {
	if n := f.Names(); len(n) > 0 && n[0] == "base-dir" {
		return
	}
	switch x := f.(type) {
	case *cli.BoolFlag:
		x.Local = true
	case *cli.StringFlag:
		x.Local = true
	case *cli.IntFlag:
		x.Local = true
	case *cli.StringSliceFlag:
		x.Local = true
	case *cli.DurationFlag:
		x.Local = true
	}
}
