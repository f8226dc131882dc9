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
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/status"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// RoleStatus is one row of `start status`.
type RoleStatus = status.Role

// Status is the one-screen state of an installation (pkg/status reads it).
type Status struct {
	status.Kingdom
	// Paused is the operator's pause (nil when not paused); Discarded counts
	// the events no general took, from logs/events.log (operator.go).
	Paused    *control.Pause
	Discarded int
	Money     *MoneyStatus // spend and engine pauses (money.go)
	Waiting   *Waiting     // why work is held (waiting.go)
	// Threshold is the chamberlain's heartbeat threshold (statusdoc.go);
	// At is when the status was read.
	Threshold time.Duration
	At        time.Time
}

// ReadStatus gathers the status without changing anything.
func ReadStatus(ctx context.Context, l layout.Layout, tc *tmux.Client, now time.Time) (*Status, error) {
	k, err := status.Read(ctx, l, tc, now)
	if err != nil {
		return nil, err
	}
	st := &Status{Kingdom: *k, Discarded: countDiscarded(l), Money: readMoney(l, now),
		Waiting: readWaiting(l), Threshold: heartbeatThreshold(l), At: now}
	st.Paused, _ = control.ReadPause(context.Background(), kv.Files(l))
	return st, nil
}

// Print writes the status as a readable table, its verdict first.
func (s *Status) Print(w io.Writer) {
	s.Verdict().print(w)
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
	s.printOperator(w)
	s.Money.print(w)
	s.Waiting.print(w, s.At)
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

// Doctor checks the prerequisites of an installation. secrets says where
// each secret variable came from (config.ApplySecrets), shown by name.
func Doctor(l layout.Layout, binDir string, secrets map[string]string) []Check {
	from := func(names ...string) string {
		var parts []string
		for _, n := range names {
			if s, ok := secrets[n]; ok && os.Getenv(n) != "" {
				parts = append(parts, n+" from "+s)
			}
		}
		if len(parts) == 0 {
			return strings.Join(names, "/") + ": not set in the environment, start's environment or " + config.EnvFile
		}
		return strings.Join(parts, ", ")
	}
	var cs []Check
	add := func(name string, ok bool, info, fix string) {
		cs = append(cs, Check{Name: name, OK: ok, Info: info, Fix: fix})
	}
	for _, tool := range []string{"tmux", "git"} {
		p, err := exec.LookPath(tool)
		add(tool, err == nil, p, "install it: apt-get install "+tool)
	}
	all, cfgErr := config.LoadAll(l.ConfigDir())
	if _, err := os.Stat(l.ConfigDir()); cfgErr == nil && err != nil {
		// Defaults are not a valid configuration of an installation that is not there.
		cfgErr = fmt.Errorf("not evaluated: no config directory (%v)", err)
	}
	if cfgErr != nil {
		add("config", false, cfgErr.Error(), "fix the named file and key, then run `start doctor` again")
	} else {
		add("config", true, l.ConfigDir()+" valid", "")
		// SPEC §10.4: every engine a general (or the petition classifier)
		// uses, checked as the soldiers will run it.
		for _, eng := range enginesInUse(all) {
			for _, c := range engine.Doctor(context.Background(), all.System, eng, engine.DoctorEnv{
				Environ: os.Environ(), UID: os.Geteuid(), SysFile: l.ConfigFile("system.yaml")}) {
				add(c.Name, c.OK, c.Info, c.Fix)
			}
		}
		if all.Sentinel.Polling.GitHub != nil {
			ok := os.Getenv("GH_TOKEN") != "" || os.Getenv("GITHUB_TOKEN") != ""
			add("github token", ok, from("GH_TOKEN", "GITHUB_TOKEN"), "set GH_TOKEN in "+l.EnvFile()+" (mode 0600)")
		}
		if all.Sentinel.Polling.Jira != nil {
			ok := os.Getenv("JIRA_USER_EMAIL") != "" && os.Getenv("JIRA_API_TOKEN") != ""
			add("jira credentials", ok, from("JIRA_USER_EMAIL", "JIRA_API_TOKEN"), "set both in "+l.EnvFile()+" (mode 0600)")
		}
		bot := os.Getenv(all.Envoy.Slack.BotTokenEnv) != ""
		appTok := os.Getenv(all.Envoy.Slack.AppTokenEnv) != ""
		info := "Slack tokens present (" + from(all.Envoy.Slack.BotTokenEnv, all.Envoy.Slack.AppTokenEnv) + "): envoy connects to Slack"
		if !bot || !appTok {
			info = "no Slack tokens: envoy runs in console mode (logs/envoy-console.log)"
		}
		add("slack", true, info, "")
		if h := all.Chamberlain.HTTP; h.Listen != "" {
			err := h.Check(os.Getenv(h.TokenEnv))
			info := "dashboard on http://" + h.Listen + "/"
			if h.Listen == config.ListenUnix {
				info = "dashboard on unix socket " + l.DashboardSocket()
			}
			if err != nil {
				info = err.Error()
			}
			add("dashboard", err == nil, info, "set "+h.TokenEnv+" in "+l.EnvFile()+" (mode 0600), or listen on 127.0.0.1")
		}
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

// enginesInUse lists runtime.engine and every manifest's engine, once each.
func enginesInUse(all *config.All) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range append([]string{all.System.Runtime.Engine}, manifestEngines(all)...) {
		if e != "" && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

func manifestEngines(all *config.All) []string {
	var out []string
	for _, m := range all.Manifests {
		out = append(out, all.System.EngineFor(m))
	}
	return out
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
