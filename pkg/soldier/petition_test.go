package soldier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// petitionWith runs a petition with the command engine argv. The timeout
// ends only the "timeout" case (an engine that sleeps); the others answer at
// once, and on a loaded machine a short timeout would fail them.
func petitionWith(t *testing.T, answer string, argv []string, timeout time.Duration) (string, error) {
	t.Helper()
	dir := t.TempDir()
	ans := filepath.Join(dir, "answer.json")
	os.WriteFile(ans, []byte(answer), 0o600)
	prompt := filepath.Join(dir, "prompt.md")
	os.WriteFile(prompt, []byte("classify"), 0o600)
	sys := config.DefaultSystem()
	sys.Runtime.Engine = "command"
	for i, a := range argv {
		argv[i] = strings.ReplaceAll(a, "ANSWER", ans)
	}
	sys.Runtime.Command.Argv = argv
	out := filepath.Join(dir, "petition-results", "evt-slack-msg-1.json")
	err := Petition(context.Background(), PetitionOptions{BaseDir: dir, EventID: "evt-slack-msg-1", PromptFile: prompt,
		Out: out, Timeout: timeout, System: sys, Environ: os.Environ()})
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("no out file: %v (petition err %v)", rerr, err)
	}
	return string(b), err
}

func TestPetition_CommandEngineAnswers(t *testing.T) {
	got, err := petitionWith(t, `{"general":"gen-herald"}`, []string{"cp", "ANSWER", "{result_path}"}, time.Minute)
	if err != nil || !strings.Contains(got, `"general": "gen-herald"`) {
		t.Fatalf("got %s, err %v", got, err)
	}
	got, err = petitionWith(t, "Sure: {\"direct_response\": \"Hello!\"}", []string{"cp", "ANSWER", "{result_path}"}, time.Minute)
	if err != nil || !strings.Contains(got, `"direct_response": "Hello!"`) {
		t.Fatalf("got %s, err %v", got, err)
	}
}

func TestPetition_FailuresWriteError(t *testing.T) {
	for name, tc := range map[string]struct {
		answer string
		argv   []string
		want   string
	}{
		"garbage":     {"nothing useful", []string{"cp", "ANSWER", "{result_path}"}, "not a JSON object"},
		"both":        {`{"general":"gen-a","direct_response":"x"}`, []string{"cp", "ANSWER", "{result_path}"}, "both"},
		"bad general": {`{"general":"../x"}`, []string{"cp", "ANSWER", "{result_path}"}, "invalid general"},
		"timeout":     {"", []string{"sleep", "30"}, "timed out"},
		"missing":     {"", []string{"/no/such/engine"}, "not found"},
	} {
		t.Run(name, func(t *testing.T) {
			timeout := time.Minute
			if name == "timeout" {
				timeout = 2 * time.Second // the behaviour under test
			}
			got, err := petitionWith(t, tc.answer, tc.argv, timeout)
			if err == nil || !strings.Contains(got, `"error"`) || !strings.Contains(got, tc.want) {
				t.Fatalf("got %s, err %v; want error ~%q", got, err, tc.want)
			}
		})
	}
}
