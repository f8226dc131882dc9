package start

import (
	"errors"
	"io/fs"
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
