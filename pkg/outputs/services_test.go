package outputs

import (
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The general writes where the sentinel reads: sentinel.yaml's GitHub
// API and Jira site, and the write token of kingdom.env.
func TestLoad_TheSentinelsServices(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GITHUB_TOKEN": "ghs_write", "JIRA_USER_EMAIL": "k@x", "JIRA_API_TOKEN": "jt", "JIRA_URL": "https://env.example"}
	s := Load(l, func(k string) string { return env[k] })
	if s.GitHubAPI != "https://api.github.com" || s.GitHubToken != "ghs_write" || s.JiraURL != "https://env.example" || s.JiraToken != "jt" {
		t.Errorf("defaults: %+v", s)
	}
	y := "polling:\n  github:\n    api_url: https://ghe.example/api/v3\n  jira:\n    url: https://jira.example\n"
	if err := os.WriteFile(l.ConfigFile("sentinel.yaml"), []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	env["GH_TOKEN"] = "ghp_first"
	s = Load(l, func(k string) string { return env[k] })
	if s.GitHubAPI != "https://ghe.example/api/v3" || s.GitHubToken != "ghp_first" || s.JiraURL != "https://jira.example" {
		t.Errorf("from sentinel.yaml: %+v", s)
	}
}
