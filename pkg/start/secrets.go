package start

import (
	"errors"
	"io/fs"
	"maps"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// PublishSecrets hands the secrets start was given in its own environment
// (systemd Environment=/EnvironmentFile=, a shell export) to its roles: they
// run in tmux sessions, whose environment must never hold a secret, so the
// values go to a 0600 file under the base dir that each role reads before
// kingdom.env (SPEC §11.4: the environment wins). With none, the file is
// removed, so a secret taken out of the environment is gone at the next
// start.
func PublishSecrets(l layout.Layout, sources map[string]string) error {
	b, err := config.StartSecrets(sources)
	if err != nil {
		return err
	}
	has := false
	for _, s := range sources {
		has = has || s == config.SourceEnvironment
	}
	if !has {
		if err := os.Remove(l.StartSecretsFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.WriteFile(l.StartSecretsFile(), b, 0o600)
}

// ReloadSecrets re-applies kingdom.env (envFile) to start's environment
// after it changed; sources is what ApplySecrets reported (where each
// secret came from), and the answer replaces it. A variable from start's
// own environment still wins; one kingdom.env set takes the file's new
// value, or is unset when the file no longer has it.
func ReloadSecrets(envFile string, sources map[string]string) (map[string]string, error) {
	vals, err := config.LoadEnvFile(envFile)
	if err != nil {
		return sources, err
	}
	out := maps.Clone(sources)
	for k, src := range sources {
		if _, ok := vals[k]; src == config.SourceEnvFile && !ok {
			os.Unsetenv(k)
			delete(out, k)
		}
	}
	for k, v := range vals {
		_, set := os.LookupEnv(k)
		if sources[k] != config.SourceEnvFile && set {
			continue // the environment wins
		}
		if err := os.Setenv(k, v); err != nil {
			return out, err
		}
		out[k] = config.SourceEnvFile
	}
	return out, nil
}
