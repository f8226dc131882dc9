package start

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// RoleStatus is one row of `start status`.
type RoleStatus struct {
	Name         string
	SessionAlive bool
	HeartbeatAge time.Duration // -1 when no heartbeat yet
	LeaderPID    int           // 0 when nobody holds the lock
}

// Status is the one-screen state of an installation.
type Status struct {
	StartPID       int
	Roles          []RoleStatus
	Queues         map[string]map[string]int // kind → state → count
	ActiveSoldiers int
	Health         health.Snapshot
	HealthErr      error
	Money          *MoneyStatus // spend and engine pauses (money.go)
}

// ReadStatus gathers the status without changing anything.
func ReadStatus(ctx context.Context, l layout.Layout, tc *tmux.Client, now time.Time) (*Status, error) {
	st := &Status{Queues: map[string]map[string]int{}}
	if held, pid := lockfile.Held(l.LeaderLock(layout.RoleStart)); held {
		st.StartPID = pid
	}
	names := append([]string{}, CoreRoles...)
	ms, _ := config.LoadManifests(l.GeneralsConfigDir()) // the valid ones, even beside a broken file
	for _, m := range ms {
		names = append(names, m.Name)
	}
	live, err := tc.List(ctx)
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	for _, s := range live {
		alive[s.Name] = true
	}
	for _, n := range names {
		rs := RoleStatus{Name: n, SessionAlive: alive[n], HeartbeatAge: -1}
		if fi, err := os.Stat(l.Heartbeat(n)); err == nil {
			rs.HeartbeatAge = now.Sub(fi.ModTime())
		}
		if held, pid := lockfile.Held(l.LeaderLock(n)); held {
			rs.LeaderPID = pid
		}
		st.Roles = append(st.Roles, rs)
	}
	for _, kind := range []string{layout.QEvents, layout.QTasks, layout.QMessages} {
		q := queue.New(l, kind, nil)
		st.Queues[kind] = map[string]int{}
		for _, s := range layout.QueueStates[kind] {
			st.Queues[kind][s] = q.Count(s)
		}
	}
	if es, err := sessions.New(l).List(); err == nil {
		st.ActiveSoldiers = len(es)
	}
	st.Health, st.HealthErr = health.Read(l.Resources(), now)
	st.Money = readMoney(l, now)
	return st, nil
}

// Print writes the status as a readable table.
func (s *Status) Print(w io.Writer) {
	if s.StartPID > 0 {
		fmt.Fprintf(w, "start: running (pid %d)\n\n", s.StartPID)
	} else {
		fmt.Fprintf(w, "start: not running\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tSESSION\tHEARTBEAT\tLEADER PID")
	for _, r := range s.Roles {
		sess := "down"
		if r.SessionAlive {
			sess = "alive"
		}
		hb := "never"
		if r.HeartbeatAge >= 0 {
			hb = r.HeartbeatAge.Round(time.Second).String() + " ago"
		}
		pid := "-"
		if r.LeaderPID > 0 {
			pid = fmt.Sprint(r.LeaderPID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, sess, hb, pid)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tSTATES")
	for _, kind := range []string{layout.QEvents, layout.QTasks, layout.QMessages} {
		var parts []string
		for _, st := range layout.QueueStates[kind] {
			parts = append(parts, fmt.Sprintf("%s=%d", st, s.Queues[kind][st]))
		}
		fmt.Fprintf(tw, "%s\t%s\n", kind, strings.Join(parts, " "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nactive soldiers: %d\n", s.ActiveSoldiers)
	s.Money.print(w)
	if s.HealthErr != nil {
		fmt.Fprintf(w, "health: unknown (%v)\n", s.HealthErr)
		return
	}
	h := s.Health
	stale := ""
	if h.Stale {
		stale = " (resources.json stale: treated as orange)"
	}
	fmt.Fprintf(w, "health: %s%s\ntokens: %s\n", h.Health, stale, h.TokenStatus)
}

// Check is one `start doctor` finding.
type Check struct {
	Name string
	OK   bool
	Info string // what was found
	Fix  string // how to fix a failure
}

// Doctor checks the prerequisites of an installation.
func Doctor(l layout.Layout, binDir string) []Check {
	var cs []Check
	add := func(name string, ok bool, info, fix string) {
		cs = append(cs, Check{Name: name, OK: ok, Info: info, Fix: fix})
	}
	for _, tool := range []string{"tmux", "git"} {
		p, err := exec.LookPath(tool)
		add(tool, err == nil, p, "install it: apt-get install "+tool)
	}
	all, cfgErr := config.LoadAll(l.ConfigDir())
	if cfgErr != nil {
		add("config", false, cfgErr.Error(), "fix the named file and key, then run `start doctor` again")
	} else {
		add("config", true, l.ConfigDir()+" valid", "")
		engine := all.System.Runtime.Engine
		var cmd string
		switch engine {
		case config.EngineClaude:
			cmd = all.System.Runtime.Claude.Command
		case config.EngineCodex:
			cmd = all.System.Runtime.Codex.Command
		case config.EngineCommand:
			if len(all.System.Runtime.Command.Argv) > 0 {
				cmd = all.System.Runtime.Command.Argv[0]
			}
		}
		p, err := exec.LookPath(cmd)
		add("engine "+engine, err == nil && cmd != "", p, fmt.Sprintf("install %q or set runtime.engine / runtime.%s in %s", cmd, engine, l.ConfigFile("system.yaml")))
		if all.Sentinel.Polling.GitHub != nil {
			ok := os.Getenv("GH_TOKEN") != "" || os.Getenv("GITHUB_TOKEN") != ""
			add("github token", ok, "GH_TOKEN/GITHUB_TOKEN", "set GH_TOKEN in "+l.EnvFile()+" (mode 0600)")
		}
		if all.Sentinel.Polling.Jira != nil {
			ok := os.Getenv("JIRA_USER_EMAIL") != "" && os.Getenv("JIRA_API_TOKEN") != ""
			add("jira credentials", ok, "JIRA_USER_EMAIL/JIRA_API_TOKEN", "set both in "+l.EnvFile()+" (mode 0600)")
		}
		bot := os.Getenv(all.Envoy.Slack.BotTokenEnv) != ""
		appTok := os.Getenv(all.Envoy.Slack.AppTokenEnv) != ""
		info := "Slack tokens present: envoy connects to Slack"
		if !bot || !appTok {
			info = "no Slack tokens: envoy runs in console mode (logs/envoy-console.log)"
		}
		add("slack", true, info, "")
	}
	if fi, err := os.Stat(l.EnvFile()); err == nil {
		ok := fi.Mode().Perm() == 0o600
		add("kingdom.env mode", ok, fi.Mode().Perm().String(), "chmod 600 "+l.EnvFile())
	}
	if fi, err := os.Stat(l.Base); err == nil {
		ok := fi.Mode().Perm()&0o077 == 0
		add("base dir permissions", ok, fmt.Sprintf("%s %v", l.Base, fi.Mode().Perm()), "chmod 700 "+l.Base)
		probe := filepath.Join(l.StateDir(), ".doctor-probe")
		werr := os.WriteFile(probe, nil, 0o600)
		os.Remove(probe)
		add("base dir writable", werr == nil, l.StateDir(), "run as the user that owns "+l.Base)
	} else {
		add("base dir", false, err.Error(), "run `start` once to create it, or pass --base-dir")
	}
	if binDir == "" {
		add("role binaries", false, "not found", "run `make build` (binaries in bin/) or copy them to "+l.Bin())
	} else {
		add("role binaries", true, binDir, "")
	}
	return cs
}

// PrintChecks writes doctor findings; it returns the number of failures.
func PrintChecks(w io.Writer, cs []Check) int {
	fails := 0
	for _, c := range cs {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			fails++
		}
		fmt.Fprintf(w, "[%s] %-22s %s\n", mark, c.Name, c.Info)
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", c.Fix)
		}
	}
	return fails
}
