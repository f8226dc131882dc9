package config

import "path/filepath"

// SecretEnvNames are the secret variables the config of dir names, for
// redact.SetExtraNames: system.yaml runtime.secret_env, chamberlain.yaml
// http.token_env (the dashboard's bearer token) and envoy.yaml's Slack
// token variables (with their default names). A file that does not load gives its defaults' names (the
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
	}
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
	return append(names, s.BotTokenEnv, s.AppTokenEnv)
}
