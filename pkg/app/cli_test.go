package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

func testCommand(ran *string) *cli.Command {
	return &cli.Command{
		Name:  "role",
		Flags: append(RoleFlags(), &cli.StringFlag{Name: "name"}),
		Action: func(context.Context, *cli.Command) error {
			*ran = "root"
			return nil
		},
		Commands: []*cli.Command{
			{Name: "reply", ArgsUsage: "<task> <text>", Flags: []cli.Flag{BaseDirFlag()},
				Action: func(_ context.Context, c *cli.Command) error {
					*ran = "reply " + strings.Join(c.Args().Slice(), " ")
					return nil
				}},
			{Name: "task", Commands: []*cli.Command{
				{Name: "cancel", ArgsUsage: "<id>", Action: func(_ context.Context, c *cli.Command) error { *ran = "cancel " + c.Args().First(); return nil }},
			}},
		},
	}
}

func runPrepared(t *testing.T, args ...string) (ran, out string, code int) {
	t.Helper()
	var buf bytes.Buffer
	cmd := Prepare(testCommand(&ran))
	cmd.Writer, cmd.ErrWriter = &buf, &buf
	err := cmd.Run(context.Background(), append([]string{"role"}, args...))
	return ran, buf.String(), ExitCode(err)
}

func TestPrepare_UnknownSubcommandIsAUsageErrorNotARun(t *testing.T) {
	ran, out, code := runPrepared(t, "frobnicate")
	if ran != "" || code != ExitUsage {
		t.Fatalf("ran %q, exit %d; want nothing run and exit %d", ran, code, ExitUsage)
	}
	if !strings.Contains(out, "USAGE") || !strings.Contains(out, "reply") {
		t.Fatalf("usage not printed:\n%s", out)
	}
	if ran, _, code := runPrepared(t, "task", "frobnicate"); ran != "" || code != ExitUsage {
		t.Fatalf("group with unknown subcommand: ran %q, exit %d", ran, code)
	}
	if ran, _, code := runPrepared(t, "task"); ran != "" || code != ExitUsage {
		t.Fatalf("group without subcommand: ran %q, exit %d", ran, code)
	}
	// Commands that declare arguments still get them.
	if ran, _, code := runPrepared(t, "reply", "task-1", "hello"); ran != "reply task-1 hello" || code != 0 {
		t.Fatalf("reply: ran %q, exit %d", ran, code)
	}
	if ran, _, code := runPrepared(t, "task", "cancel", "task-1"); ran != "cancel task-1" || code != 0 {
		t.Fatalf("cancel: ran %q, exit %d", ran, code)
	}
	if ran, _, code := runPrepared(t); ran != "root" || code != 0 {
		t.Fatalf("root: ran %q, exit %d", ran, code)
	}
}

func TestPrepare_SubcommandHelpListsOnlyItsFlags(t *testing.T) {
	_, out, _ := runPrepared(t, "reply", "--help")
	if strings.Contains(out, "--once") || strings.Contains(out, "--standby") || strings.Contains(out, "--name") {
		t.Fatalf("reply help lists the parent's flags:\n%s", out)
	}
	if !strings.Contains(out, "--base-dir") {
		t.Fatalf("reply help lost --base-dir:\n%s", out)
	}
	if _, _, code := runPrepared(t, "reply", "--once", "x", "y"); code == 0 {
		t.Fatal("reply accepted the parent's --once")
	}
}

func TestPrepare_VersionPrintsTheStampedVersion(t *testing.T) {
	old := Version
	Version = "v1.2.3-test"
	defer func() { Version = old }()
	_, out, code := runPrepared(t, "--version")
	if code != 0 || !strings.Contains(out, "v1.2.3-test") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}
