package operator

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Check is one `start doctor` finding.
type Check struct {
	Name string
	OK   bool
	Warn bool   // OK, but worth the operator's attention (shown with its fix)
	Info string // what was found
	Fix  string // how to fix a failure or a warning
}

// Doctor checks the prerequisites of an installation. secrets says where
// each secret variable came from (config.ApplySecrets), shown by name.
func Doctor(ctx context.Context, l layout.Layout, binDir string, secrets map[string]string) []Check {
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
			for _, c := range engine.Doctor(ctx, all.System, eng, engine.DoctorEnv{
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
		// The envoy's own start-up warning (it cannot be imported here:
		// roles never import each other), checked before anything runs.
		if bot && appTok && all.Envoy.DefaultChannel() == "" {
			cs = append(cs, Check{Name: "slack default channel", OK: true, Warn: true,
				Info: "Slack tokens set but no default channel: messages about work that did not come from Slack (inbox, GitHub, Jira, schedules, alerts) fail with \"no channel\"",
				Fix:  "set slack.default_channel in " + l.ConfigFile("envoy.yaml") + " (or " + config.EnvDefaultChannel + ")"})
		}
		if all.System.Store.Kind == config.StorePostgres {
			cs = append(cs, storeChecks(ctx, all.System.Store, from)...)
		}
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
	return append(cs, ownership(l, binDir)...)
}

// ownership checks who owns what (SPEC §8): the runtime tree belongs to
// the kingdom user (the base dir's owner), the binaries do not (root runs
// them too: `start stop`, checks), and that user can read kingdom.env.
func ownership(l layout.Layout, binDir string) []Check {
	owner, ok := uidOf(l.Base)
	if !ok {
		return nil
	}
	name := userName(owner)
	var cs []Check
	var wrong []string
	if es, err := os.ReadDir(l.Base); err == nil {
		for _, e := range es {
			p := filepath.Join(l.Base, e.Name())
			if !e.IsDir() || p == filepath.Clean(binDir) || e.Name() == "bin" {
				continue
			}
			if u, ok := uidOf(p); ok && u != owner {
				wrong = append(wrong, fmt.Sprintf("%s (%s)", p, userName(u)))
			}
		}
	}
	info := fmt.Sprintf("%s and its directories belong to %s", l.Base, name)
	if len(wrong) > 0 {
		info = "not owned by " + name + ": " + strings.Join(wrong, ", ")
	}
	cs = append(cs, Check{Name: "tree ownership", OK: len(wrong) == 0, Info: info,
		Fix: fmt.Sprintf("chown -R %s: %s, or run every command that writes as %s (runuser -u %s -- …)", name, strings.Join(pathsOf(wrong), " "), name, name)})
	if binDir != "" && owner != 0 {
		var loose []string
		paths := []string{binDir}
		if es, err := os.ReadDir(binDir); err == nil {
			for _, e := range es {
				paths = append(paths, filepath.Join(binDir, e.Name()))
			}
		}
		// A writable parent lets the user swap the whole directory.
		for d := filepath.Dir(binDir); ; d = filepath.Dir(d) {
			paths = append(paths, d)
			if d == filepath.Dir(d) {
				break
			}
		}
		for _, p := range paths {
			if writableBy(p, owner) {
				loose = append(loose, p)
			}
		}
		info := binDir + " not replaceable by " + name
		if len(loose) > 0 {
			info = fmt.Sprintf("%s can change what root runs (its agents read untrusted text): %s", name, strings.Join(loose, ", "))
		}
		cs = append(cs, Check{Name: "binaries ownership", OK: len(loose) == 0, Info: info,
			Fix: "install the binaries outside the tree, owned by root: install -d -m 0755 /usr/local/lib/kingdom/bin && install -m 0755 -o root -g root bin/* /usr/local/lib/kingdom/bin/"})
	}
	if u, ok := uidOf(l.EnvFile()); ok {
		cs = append(cs, Check{Name: "kingdom.env owner", OK: u == owner,
			Info: fmt.Sprintf("%s belongs to %s", l.EnvFile(), userName(u)),
			Fix:  fmt.Sprintf("chown %s: %s (mode 0600: only its owner reads it)", name, l.EnvFile())})
	}
	return cs
}

func pathsOf(wrong []string) []string {
	out := make([]string, len(wrong))
	for i, w := range wrong {
		out[i], _, _ = strings.Cut(w, " (")
	}
	return out
}

func uidOf(p string) (int, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// writableBy reports whether uid may change p: it owns it (and so may
// chmod it), or p is group- or world-writable (a sticky directory, like
// /tmp, lets no one replace another user's entries).
func writableBy(p string, uid int) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if int(st.Uid) == uid {
		return true
	}
	if fi.IsDir() && fi.Mode()&os.ModeSticky != 0 {
		return false
	}
	return fi.Mode().Perm()&0o022 != 0
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// enginesInUse lists runtime.engine and every manifest's engine, once each.
func enginesInUse(all *config.All) []string {
	out := []string{all.System.Runtime.Engine}
	for _, m := range all.Manifests {
		if e := all.System.EngineFor(m); !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return slices.DeleteFunc(out, func(e string) bool { return e == "" })
}

// PrintChecks writes doctor findings; it returns the number of failures.
func PrintChecks(w io.Writer, cs []Check) int {
	fails := 0
	for _, c := range cs {
		mark := "ok  "
		switch {
		case !c.OK:
			mark = "FAIL"
			fails++
		case c.Warn:
			mark = "warn"
		}
		fmt.Fprintf(w, "[%s] %-22s %s\n", mark, c.Name, c.Info)
		if (!c.OK || c.Warn) && c.Fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", c.Fix)
		}
	}
	return fails
}
