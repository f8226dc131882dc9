package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// All is the whole configuration directory.
type All struct {
	Dir         string
	System      *System
	Sentinel    *Sentinel
	King        *King
	Envoy       *Envoy
	Chamberlain *Chamberlain
	Manifests   []*Manifest // sorted by name
}

// LoadAll loads and validates every file in configDir, including the
// manifests in configDir/generals, and checks the files against each other.
// It reports every problem at once, joined; on any problem it returns nil.
func LoadAll(configDir string) (*All, error) {
	a := &All{
		Dir:         configDir,
		System:      DefaultSystem(),
		King:        DefaultKing(),
		Envoy:       DefaultEnvoy(),
		Chamberlain: DefaultChamberlain(),
	}
	var errs []*Error
	collect := func(err error, file string) {
		if err != nil {
			errs = append(errs, asErrors(err, file)...)
		}
	}
	path := func(name string) string { return filepath.Join(configDir, name) }

	sysSrc, err := loadRole(path(SystemFile), a.System)
	collect(err, path(SystemFile))
	a.Sentinel, err = LoadSentinel(path(SentinelFile))
	collect(err, path(SentinelFile))
	_, err = loadRole(path(KingFile), a.King)
	collect(err, path(KingFile))
	_, err = loadRole(path(EnvoyFile), a.Envoy)
	collect(err, path(EnvoyFile))
	_, err = loadRole(path(ChamberlainFile), a.Chamberlain)
	collect(err, path(ChamberlainFile))
	a.Manifests, err = LoadManifests(path(GeneralsDir))
	collect(err, path(GeneralsDir))

	if len(errs) == 0 {
		errs = append(errs, a.crossCheck(sysSrc)...)
	}
	if err := join(errs); err != nil {
		return nil, err
	}
	return a, nil
}

// crossCheck finds problems that span files.
func (a *All) crossCheck(sysSrc *source) []*Error {
	var errs []*Error
	sysFile := filepath.Join(a.Dir, SystemFile)
	for i, name := range a.System.Runtime.EnvPassthrough {
		key := fmt.Sprintf("runtime.env_passthrough[%d]", i)
		if name == a.Envoy.Slack.BotTokenEnv || name == a.Envoy.Slack.AppTokenEnv {
			errs = append(errs, &Error{File: sysFile, Line: sysSrc.line(key), Key: key,
				Msg: fmt.Sprintf("expected a variable that is not a Slack token (envoy.yaml names %s), got %q", name, name)})
		}
		for _, m := range a.Manifests {
			if name == m.GitHub.ReadTokenEnv {
				// Lent to that general's soldiers only, as GH_TOKEN.
				errs = append(errs, &Error{File: sysFile, Line: sysSrc.line(key), Key: key,
					Msg: fmt.Sprintf("expected a variable that is not a GitHub token (%s names it in github.read_token_env), got %q", m.File, name)})
			}
		}
	}
	for _, m := range a.Manifests {
		engine := a.System.EngineFor(m)
		switch {
		case m.Engine == EngineCommand && len(a.System.Runtime.Command.Argv) == 0:
			errs = append(errs, &Error{File: m.File, Line: m.src.line("engine"), Key: "engine",
				Msg: fmt.Sprintf("engine command needs runtime.command.argv in %s", sysFile)})
		case m.Engine == "" && len(m.SupportedEngines) > 0 && !slices.Contains(m.SupportedEngines, engine):
			errs = append(errs, &Error{File: m.File, Line: m.src.line("supported_engines"), Key: "supported_engines",
				Msg: fmt.Sprintf("expected to include the engine in use, %q (runtime.engine in %s), got %s",
					engine, sysFile, strings.Join(m.SupportedEngines, "|"))})
		}
	}
	return errs
}
