package start

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// configWatch tells the operator, once per change, what a changed config
// file needs: which roles read it only when they start (restart them:
// `start restart <role>`) and which apply it by themselves.
type configWatch struct {
	l     layout.Layout
	stamp map[string]stamp // path → last seen
}

type stamp struct {
	mod  time.Time
	size int64
}

// configEffect is what one config file's change needs.
type configEffect struct {
	restart []string // roles to restart
	applied string   // who applies it by itself, "" when none
}

func newConfigWatch(l layout.Layout) *configWatch {
	w := &configWatch{l: l, stamp: map[string]stamp{}}
	w.changes() // the files as they are at start are what the roles load
	return w
}

// files are the config files a role reads, by path.
func (w *configWatch) files() []string {
	dir := w.l.ConfigDir()
	fs := []string{config.SystemFile, config.KingFile, config.SentinelFile, config.EnvoyFile, config.ChamberlainFile, config.EnvFile}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, filepath.Join(dir, f))
	}
	ms, _ := filepath.Glob(filepath.Join(w.l.GeneralsConfigDir(), "*.yaml"))
	return append(out, ms...)
}

// changes returns the config files created, changed or removed since the
// last call.
func (w *configWatch) changes() []string {
	now := map[string]stamp{}
	for _, p := range w.files() {
		if fi, err := os.Stat(p); err == nil {
			now[p] = stamp{mod: fi.ModTime(), size: fi.Size()}
		}
	}
	var changed []string
	for p, st := range now {
		if old, had := w.stamp[p]; !had || old != st {
			changed = append(changed, p)
		}
	}
	for p := range w.stamp {
		if _, ok := now[p]; !ok {
			changed = append(changed, p)
		}
	}
	w.stamp = now
	slices.Sort(changed)
	return changed
}

// effect says what a change of the config file at path needs, given the
// installed generals.
func (w *configWatch) effect(path string, generals []string) configEffect {
	all := append([]string{layout.RoleSentinel, layout.RoleKing, layout.RoleEnvoy, layout.RoleChamberlain}, generals...)
	switch name := filepath.Base(path); {
	case filepath.Dir(path) == w.l.GeneralsConfigDir():
		g := strings.TrimSuffix(name, ".yaml")
		return configEffect{restart: []string{g}, applied: "the king routes by it at its next tick; start launches a new general at its next round"}
	case name == config.SystemFile, name == config.EnvFile:
		return configEffect{restart: all}
	case name == config.KingFile:
		// host_max_soldiers is read by every general.
		return configEffect{restart: append([]string{layout.RoleKing}, generals...)}
	case name == config.EnvoyFile:
		return configEffect{applied: "the envoy applies its channels, users and retries at its next tick; tokens and api_url need `start restart envoy`"}
	case name == config.SentinelFile:
		return configEffect{restart: []string{layout.RoleSentinel}}
	case name == config.ChamberlainFile:
		return configEffect{restart: []string{layout.RoleChamberlain}}
	}
	return configEffect{}
}

// noticeConfig logs, once per change of a config file, which roles must
// restart to apply it and what applies it by itself (the journal shows it:
// start's log lines go to its stdout).
func (w *Watchdog) noticeConfig() {
	if w.cfg == nil {
		return
	}
	changed := w.cfg.changes()
	if len(changed) == 0 {
		return
	}
	var generals []string
	if specs, err := w.Specs(); err == nil {
		for _, sp := range specs {
			if strings.HasPrefix(sp.Name, "gen-") {
				generals = append(generals, sp.Name)
			}
		}
	}
	for _, p := range changed {
		if filepath.Base(p) == config.EnvFile && w.hl != nil {
			w.reloadSecrets()
		}
		e := w.cfg.effect(p, generals)
		args := []any{"path", p, "cat", "SYSTEM"}
		if len(e.restart) > 0 {
			cmds := make([]string, len(e.restart))
			for i, r := range e.restart {
				cmds[i] = "start restart " + r
			}
			args = append(args, "restart", strings.Join(e.restart, ","), "how", strings.Join(cmds, "; "))
		}
		if e.applied != "" {
			args = append(args, "applied", e.applied)
		}
		w.o.Log.Info("config file changed", args...)
		w.o.Events.Emit("system.config_changed", map[string]any{"path": p, "restart": e.restart})
	}
}

// reloadSecrets re-applies kingdom.env to start's environment and has the
// host lease reconnect with it (SPEC §12.2: a DSN fixed in kingdom.env
// reaches start's store without a restart; the roles read it when they
// restart).
func (w *Watchdog) reloadSecrets() {
	if w.o.Host.Reload != nil {
		if err := w.o.Host.Reload(); err != nil {
			w.o.Log.Error("kingdom.env changed but does not load: start keeps its secrets as they were", "err", err, "cat", "ALERT")
			return
		}
	}
	w.hl.reconnect()
}
