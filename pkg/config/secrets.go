package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SecretEnvNames are the secret variables the config of dir names, for
// redact.SetExtraNames: system.yaml runtime.secret_env, chamberlain.yaml
// http.token_env (the dashboard's bearer token), system.yaml store.dsn_env
// (the PostgreSQL DSN), envoy.yaml's Slack token variables (with their
// default names) and every manifest's github.read_token_env. A file that does not load gives its defaults' names (the
// role that loads it reports the error).
func SecretEnvNames(dir string) []string {
	sys, err := LoadSystem(filepath.Join(dir, SystemFile))
	if err != nil {
		sys = nil
	}
	return SecretEnvNamesWith(sys, dir)
}

// SecretEnvNamesWith is SecretEnvNames for a caller that has already loaded
// system.yaml (nil: it did not load).
func SecretEnvNamesWith(sys *System, dir string) []string {
	var names []string
	if sys != nil {
		names = append(names, sys.Runtime.SecretEnv...)
		names = append(names, sys.Store.DSNEnv)
	}
	// The DSN may carry the database password, under its default name too.
	names = append(names, DefaultDSNEnv)
	h := DefaultHTTP()
	if c, err := LoadChamberlain(filepath.Join(dir, ChamberlainFile)); err == nil {
		h = c.HTTP
	}
	// The default name stays a secret when the config names another: a
	// KINGDOM_HTTP_TOKEN left in kingdom.env is still a token.
	names = append(names, h.TokenEnv, DefaultHTTP().TokenEnv)
	s := DefaultEnvoy().Slack
	if e, err := LoadEnvoy(filepath.Join(dir, EnvoyFile)); err == nil {
		s = e.Slack
	}
	names = append(names, s.BotTokenEnv, s.AppTokenEnv)
	// A manifest that does not load still lent nothing; the ones that did
	// may name a read token.
	ms, _ := LoadManifests(filepath.Join(dir, GeneralsDir))
	for _, m := range ms {
		if m.GitHub.ReadTokenEnv != "" {
			names = append(names, m.GitHub.ReadTokenEnv)
		}
	}
	return names
}

// Where a secret's value came from (logged with its name, never its value).
const (
	// SourceEnvironment: the process's own environment.
	SourceEnvironment = "environment"
	// SourceStart: the environment `start` was given (systemd
	// Environment=/EnvironmentFile=, a shell export), handed to roles
	// through the start secrets file, never through tmux.
	SourceStart = "start's environment"
	// SourceEnvFile: config/kingdom.env.
	SourceEnvFile = "kingdom.env"
)

// CredentialNames are variables roles read as credentials without being
// secrets themselves: they travel with the secrets from start's
// environment.
var CredentialNames = []string{"JIRA_USER_EMAIL", "SLACK_DEFAULT_CHANNEL"}

// ApplySecrets puts the secrets of the installation into the process
// environment and reports where each came from: a variable already set
// wins, then the start secrets file (startEnv, "" to skip), then kingdom.env
// (envFile). isSecret says which names of the environment to report; the
// files' names are all reported. Errors name the file, never a value.
func ApplySecrets(startEnv, envFile string, isSecret func(string) bool) (map[string]string, error) {
	src := map[string]string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if isSecret(k) || slices.Contains(CredentialNames, k) {
			src[k] = SourceEnvironment
		}
	}
	for _, f := range []struct{ path, source string }{{startEnv, SourceStart}, {envFile, SourceEnvFile}} {
		if f.path == "" {
			continue
		}
		set, err := ApplyEnvFile(f.path)
		if err != nil {
			return src, err
		}
		for _, k := range set {
			src[k] = f.source
		}
	}
	return src, nil
}

// FormatSources renders ApplySecrets' answer for a log line:
// "GH_TOKEN (start's environment), SLACK_BOT_TOKEN (kingdom.env)".
func FormatSources(src map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(src)) {
		parts = append(parts, k+" ("+src[k]+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// StartSecrets returns the KEY=VALUE lines of the variables src says came
// from the process environment, for `start` to hand its roles (0600 file,
// written by the caller). Values are quoted so LoadEnvFile reads them back
// literally.
func StartSecrets(src map[string]string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Written by `start`: the secrets of its own environment, for its roles.\n")
	for _, k := range slices.Sorted(maps.Keys(src)) {
		if src[k] != SourceEnvironment {
			continue
		}
		v := os.Getenv(k)
		q := "'"
		if strings.Contains(v, "'") {
			q = `"`
		}
		if strings.Contains(v, q) || strings.ContainsAny(v, "\n\r") {
			return nil, fmt.Errorf("variable %s of start's environment: a value holding both quote kinds or a newline cannot be handed to the roles; put it in kingdom.env", k)
		}
		b.WriteString(k + "=" + q + v + q + "\n")
	}
	return []byte(b.String()), nil
}
