package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// Check is one finding of `start doctor` about an engine (SPEC §10.4).
type Check struct {
	Name string
	OK   bool
	Info string // what was found
	Fix  string // how to fix a failure
}

// DoctorEnv is what Doctor looks at besides the configuration.
type DoctorEnv struct {
	Environ []string // the environment the soldiers get (kingdom.env applied)
	UID     int      // the user Kingdom runs as
	SysFile string   // system.yaml, named in fixes
}

// versionTimeout bounds `<engine> --version`.
const versionTimeout = 20 * time.Second

// Doctor checks engine eng as the soldiers will run it: the binary runs
// (`--version`), codex loads its configuration (a refused config.toml is
// found before any task meets it), claude's bypass mode is not asked for
// as root, and credentials are present (an API key variable that reaches the engine, or
// the CLI's own login), and the kingdom user's claude settings.json, which
// soldiers never load, is named as overridden (SPEC §12.3). Each failure
// says how to fix it.
func Doctor(ctx context.Context, sys *config.System, eng string, e DoctorEnv) []Check {
	var cs []Check
	add := func(name string, ok bool, info, fix string) {
		cs = append(cs, Check{Name: "engine " + eng + ": " + name, OK: ok, Info: info, Fix: fix})
	}
	rt := sys.Runtime
	var command string
	switch eng {
	case config.EngineClaude:
		command = rt.Claude.Command
	case config.EngineCodex:
		command = rt.Codex.Command
	case config.EngineCommand:
		if len(rt.Command.Argv) > 0 {
			command = rt.Command.Argv[0]
		}
	}
	path, err := exec.LookPath(command)
	if command == "" || err != nil {
		add("binary", false, command+" not found on the PATH "+os.Getenv("PATH"), installFix(eng, e.SysFile))
		return cs
	}
	if eng == config.EngineCommand {
		add("binary", true, path, "")
		return cs
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(vctx, path, "--version")
	cmd.Env = Env(eng, e.Environ, rt.EnvPassthrough, nil)
	out, verr := cmd.CombinedOutput()
	first := strings.TrimSpace(string(bytes.SplitN(out, []byte("\n"), 2)[0]))
	if verr != nil {
		add("binary", false, path+" --version: "+verr.Error()+": "+first, installFix(eng, e.SysFile))
	} else {
		add("binary", true, path+" ("+first+")", "")
	}
	if eng == config.EngineCodex {
		// First after the binary: a refused configuration fails every
		// task before the engine does any work.
		ok, info, fix := codexConfig(ctx, path, rt, e)
		add("configuration", ok, info, fix)
	}
	if eng == config.EngineClaude {
		bypass := BypassRequested(rt.Claude.Args)
		ok := !(bypass && e.UID == 0 && Getenv(e.Environ, "IS_SANDBOX") != "1")
		info := "runtime.claude.args: " + strings.Join(rt.Claude.Args, " ")
		add("permission mode", ok, info, bypassAsRootFix(e.SysFile))
	}
	ok, info, fix := credentials(eng, rt.EnvPassthrough, e)
	add("credentials", ok, info, fix)
	if eng == config.EngineClaude {
		if ok, info, fix, found := userSettings(e); found {
			add("user settings", ok, info, fix)
		}
	}
	return cs
}

// codexConfig loads codex's configuration as the soldiers' codex will:
// `codex login status` reads config.toml (with the -c overrides of
// runtime.codex.args) and refuses it in the words `codex exec` would,
// without a model call; `--version` reads no configuration.
func codexConfig(ctx context.Context, path string, rt config.Runtime, e DoctorEnv) (bool, string, string) {
	env := Env(config.EngineCodex, e.Environ, rt.EnvPassthrough, nil)
	file := "config.toml"
	if h := CodexHome(env); h != "" {
		file = filepath.Join(h, "config.toml")
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(vctx, path, append(configOverrides(rt.Codex.Args), "login", "status")...)
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	if !codexConfigRefused().Match(out) {
		return true, file + " loads (codex login status)", ""
	}
	var said []string
	for _, l := range strings.Split(string(out), "\n") {
		// codex warns about PATH aliases under /tmp on every run.
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "WARNING:") {
			said = append(said, l)
		}
	}
	return false, file + " refused: " + Bound(strings.Join(said, " ")), codexConfigFix(e.SysFile)
}

// configOverrides are the `-c key=value` pairs of codex args.
func configOverrides(args []string) []string {
	var kv []string
	for i, a := range args {
		switch {
		case (a == "-c" || a == "--config") && i+1 < len(args):
			kv = append(kv, "-c", args[i+1])
		case strings.HasPrefix(a, "-c="), strings.HasPrefix(a, "--config="):
			kv = append(kv, "-c", a[strings.Index(a, "=")+1:])
		}
	}
	return kv
}

// userSettings reads the kingdom user's ~/.claude/settings.json, which
// soldiers never load (ClaudeSettings): what it sets is named as
// overridden, and an apiKeyHelper there (the soldiers' only way to the
// model would be lost) fails with the fix. found is false without such a
// file or without a key that matters.
func userSettings(e DoctorEnv) (ok bool, info, fix string, found bool) {
	d := ClaudeConfigDir(e.Environ)
	if d == "" {
		return false, "", "", false
	}
	p := filepath.Join(d, "settings.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return false, "", "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false, "", "", false
	}
	var keys []string
	for _, k := range []string{"env", "model", "hooks", "permissions", "apiKeyHelper", "enabledPlugins", "mcpServers"} {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false, "", "", false
	}
	info = p + " sets " + strings.Join(keys, ", ") + ": overridden, soldiers run claude with Kingdom's own settings (--setting-sources \"\", hooks off)"
	if _, helper := m["apiKeyHelper"]; helper {
		return false, info, "put the model key in kingdom.env as ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN): the apiKeyHelper of " + p + " is never run", true
	}
	return true, info, "", true
}

// BypassRequested reports whether claude args ask for bypass mode.
func BypassRequested(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--dangerously-skip-permissions", a == "--permission-mode=bypassPermissions":
			return true
		case a == "--permission-mode" && i+1 < len(args) && args[i+1] == "bypassPermissions":
			return true
		}
	}
	return false
}

// installFix is the fix of a missing engine binary, at run time and in
// `start doctor` alike.
func installFix(eng, sysFile string) string {
	const onPath = "add its directory to the PATH of the user Kingdom runs as (PATH in kingdom.env)"
	switch eng {
	case config.EngineClaude:
		return onPath + ", set runtime.claude.command in " + sysFile + " to its absolute path, or install the claude CLI (npm install -g @anthropic-ai/claude-code)"
	case config.EngineCodex:
		return onPath + ", set runtime.codex.command in " + sysFile + " to its absolute path, or install the codex CLI (npm install -g @openai/codex)"
	}
	return onPath + ", or fix runtime.command.argv in " + sysFile + " (an absolute path, or install the program)"
}

// Getenv is the value of k in env (os.Environ form; the last one wins, as
// in exec), "" when it is not set.
func Getenv(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

// credentials: an API key that reaches the engine (set and passed
// through), or the CLI's own login files.
func credentials(eng string, passthrough []string, e DoctorEnv) (bool, string, string) {
	key := credentialsOf(eng)
	var files []string
	switch eng {
	case config.EngineClaude:
		if d := ClaudeConfigDir(e.Environ); d != "" {
			files = append(files, filepath.Join(d, ".credentials.json"))
		}
		if Getenv(e.Environ, "CLAUDE_CODE_OAUTH_TOKEN") != "" && slices.Contains(passthrough, "CLAUDE_CODE_OAUTH_TOKEN") {
			return true, "CLAUDE_CODE_OAUTH_TOKEN set", ""
		}
	case config.EngineCodex:
		if h := CodexHome(e.Environ); h != "" {
			files = append(files, filepath.Join(h, "auth.json"))
		}
	}
	fix := credentialsFix(eng, e.SysFile)
	if Getenv(e.Environ, key) != "" {
		if !slices.Contains(passthrough, key) {
			return false, key + " is set but not in runtime.env_passthrough: the engine never sees it", fix
		}
		return true, key + " set", ""
	}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			return true, "logged in (" + f + ")", ""
		}
	}
	return false, "no " + key + " and no CLI login found", fix
}
