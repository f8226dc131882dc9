package general

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// An agent works in a worktree of the base clone, so it shares the clone's
// .git (config, hooks, info/) and the kingdom user's ~/.gitconfig, and it may
// run git. Config can make git run commands (core.fsmonitor, hooks,
// remote.*.uploadpack, credential helpers, filter drivers, ...). The git the
// general runs must run none of them, and holds no Slack or Jira token:
//   - gitEnv drops every secret variable but the GitHub tokens (the
//     credential helper below answers git with them, from the general's
//     environment: never in a URL or a config file, and never in a
//     soldier's), makes git read no system or global config, and sets the
//     only credential helper;
//   - gitSafetyArgs turn hooks and the fsmonitor off on the command line
//     (which beats every config file) and forbid the ext:: transport;
//   - restoreCloneConfig rewrites the base clone's .git/config to the one
//     Kingdom made before each use of the clone (a key the agent added is
//     gone, whatever its name).

// gitSafetyArgs go before the subcommand of every git the general runs.
var gitSafetyArgs = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "protocol.ext.allow=never",
}

// githubTokens are the secret variables git keeps: the credential helper
// answers with them.
var githubTokens = map[string]bool{"GH_TOKEN": true, "GITHUB_TOKEN": true}

// tokenHelper answers git's credential request with $GH_TOKEN (or
// $GITHUB_TOKEN). The token stays in the environment; the helper text is a
// constant, never built from data.
const tokenHelper = `!f() { test "$1" = get || exit 0; echo username=x-access-token; echo "password=${GH_TOKEN:-$GITHUB_TOKEN}"; }; f`

// gitEnv is the environment of every git the general runs.
func gitEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+8)
	token := false
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case githubTokens[k]:
			token = token || v != ""
		case redact.IsSecretName(k), strings.HasPrefix(k, "GIT_CONFIG"):
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_ATTR_NOSYSTEM=1")
	// With no global config, the credential helper of `gh auth setup-git`
	// is gone: answer with the GitHub token, or ask gh for its login.
	helper := ""
	if token {
		helper = tokenHelper
	} else if gh, err := exec.LookPath("gh"); err == nil && filepath.IsAbs(gh) {
		helper = "!gh auth git-credential"
	}
	if helper != "" {
		out = append(out, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0="+helper)
	}
	return out
}

// cloneConfig is the base clone's .git/config as Kingdom writes it: what
// `git clone` writes, with the origin URL Kingdom computed.
func cloneConfig(url string) []byte {
	var b strings.Builder
	b.WriteString("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n")
	b.WriteString("\tsharedRepository = " + strings.TrimPrefix(cloneSharedMode, "core.sharedRepository=") + "\n")
	b.WriteString("[remote \"origin\"]\n\turl = " + quoteConfig(url) + "\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n")
	return []byte(b.String())
}

// quoteConfig quotes a git config value.
func quoteConfig(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`).Replace(v) + `"`
}

// restoreCloneConfig rewrites the base clone's .git/config (under the clone
// lock, before git uses the clone).
func (g *General) restoreCloneConfig(ws workspace) error {
	return atomicfile.WriteFile(filepath.Join(ws.Clone, ".git", "config"), cloneConfig(g.cloneURL(ws.Repo)), 0o600)
}

func (g *General) cloneURL(repo string) string {
	return strings.ReplaceAll(g.o.System.Git.CloneURL, "{repo}", repo)
}
