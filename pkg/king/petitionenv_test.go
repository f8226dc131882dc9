package king

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// TestKing_PetitionGetsNoSecretEnvironment: the classifier process the king
// starts (`soldier-spawn petition`, which reads kingdom.env itself) is given
// the king's environment without secrets, like the tmux server's (SPEC
// §9.17): its engine could read its parent's /proc/PID/environ.
func TestKing_PetitionGetsNoSecretEnvironment(t *testing.T) {
	secrets := map[string]string{"SLACK_BOT_TOKEN": "xoxb-petition-secret-01", "JIRA_API_TOKEN": "jira-petition-secret-02",
		"CODEX_API_KEY": "codex-petition-secret-03"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	script, err := filepath.Abs("testdata/fake-classifier.sh")
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "petition-env")
	wrapper := filepath.Join(t.TempDir(), "classifier")
	body := "#!/bin/sh\nenv > '" + dump + "'\nexec /bin/sh '" + script + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, genPR, genHerald)
	f.petitionCmd = []string{wrapper, "general:gen-pr"}
	f.newKing()
	f.dm()
	f.tick()
	f.settle()
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the classifier never ran: %v", err)
	}
	for _, want := range []string{"PATH=", layout.EnvBase + "=" + f.k.l.Base} {
		if !strings.Contains(string(got), want) {
			t.Errorf("classifier environment lacks %s", want)
		}
	}
	for k, v := range secrets {
		if strings.Contains(string(got), v) {
			t.Errorf("the classifier's environment holds %s", k)
		}
	}
}
