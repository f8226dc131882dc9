package soldier

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// SecretNames is config.SecretEnvNamesWith(sys, dir) as far as this
// process's redactor can tell, for redact.SetExtraNames in a process that
// starts once per task: the redactor only looks up the names of variables
// in its environment (environ), so chamberlain.yaml and envoy.yaml are
// parsed only when one of those names is written in them (or when the file
// holds an escape, which could spell a name otherwise). Their defaults'
// names are always included. Parsing two role configs that name nothing
// of ours is a fixed cost of every task (issue #17).
func SecretNames(sys *config.System, dir string, environ []string) []string {
	names := []string{config.DefaultHTTP().TokenEnv}
	if sys != nil {
		names = append(names, sys.Runtime.SecretEnv...)
	}
	s := config.DefaultEnvoy().Slack
	names = append(names, s.BotTokenEnv, s.AppTokenEnv)
	for _, f := range []string{config.ChamberlainFile, config.EnvoyFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && mayName(b, environ) {
			return config.SecretEnvNamesWith(sys, dir)
		}
	}
	return names
}

// mayName reports whether the config text b could name a variable of
// environ whose value the redactor would replace (one at least
// redact.MinValueLen long).
func mayName(b []byte, environ []string) bool {
	if bytes.IndexByte(b, '\\') >= 0 {
		return true
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || len(v) < redact.MinValueLen {
			continue
		}
		if containsWord(b, k) {
			return true
		}
	}
	return false
}

// containsWord reports whether w occurs in b between characters that
// cannot belong to a variable name (a YAML scalar naming the variable is
// delimited so; "_" or "PWD" inside cpu_yellow or a comment is not it).
func containsWord(b []byte, w string) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(w))
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if (start == 0 || !nameByte(b[start-1])) && (end == len(b) || !nameByte(b[end])) {
			return true
		}
		i = start + 1
	}
}

func nameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
