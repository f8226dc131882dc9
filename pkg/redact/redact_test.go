package redact

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString_ExactValuesOfEverySecretVariable(t *testing.T) {
	vals := map[string]string{
		"GH_TOKEN":                "gh-plain-value-000001",
		"GITHUB_TOKEN":            "github-plain-value-02",
		"JIRA_API_TOKEN":          "jira-plain-value-0003",
		"SLACK_BOT_TOKEN":         "slack-bot-plain-0004",
		"SLACK_APP_TOKEN":         "slack-app-plain-0005",
		"SLACK_OTHER_TOKEN":       "slack-other-plain-06",
		"ANTHROPIC_API_KEY":       "anthropic-plain-0007",
		"OPENAI_API_KEY":          "openai-plain-value-08",
		"CLAUDE_CODE_OAUTH_TOKEN": "claude-oauth-plain-11",
		"ANTHROPIC_AUTH_TOKEN":    "anthropic-auth-plain-12",
		"CODEX_API_KEY":           "codex-plain-value-13",
		"MY_DB_PASSWORD":          "db-plain-value-000009",
	}
	for k, v := range vals {
		t.Setenv(k, v)
	}
	t.Setenv("NOT_A_SECRET", "ordinary-value-00010")
	SetExtraNames([]string{"MY_DB_PASSWORD"})
	defer SetExtraNames(nil)
	var in strings.Builder
	for _, v := range vals {
		in.WriteString("a " + v + " b\n")
	}
	in.WriteString("ordinary-value-00010\n")
	got := String(in.String())
	for k, v := range vals {
		if strings.Contains(got, v) {
			t.Errorf("%s's value survived: %q", k, got)
		}
	}
	if !strings.Contains(got, "ordinary-value-00010") {
		t.Errorf("a variable that is no secret was redacted: %q", got)
	}
	if n := strings.Count(got, Marker); n != len(vals) {
		t.Errorf("markers = %d, want %d: %q", n, len(vals), got)
	}
}

func TestString_TokenShapes(t *testing.T) {
	for _, s := range []string{
		"xoxb-1234-5678-abcdef", "xapp-1-A0-123-abc", "ghp_abcdefghijklmnopqrstuvwxyz0123",
		"github_pat_abcdefghijklmnopqrstuvwxyz", "sk-ant-api03-abcdefghijklmnop", "sk-proj-abcdefghijklmnopqrstuvwxyz",
		"Authorization: Bearer abc.def.ghi", "https://x.invalid/?token=s3cr3tvalue&x=1",
	} {
		if got := String("x " + s + " y"); strings.Contains(got, s) || !strings.Contains(got, Marker) {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
	// Ordinary ids stay readable.
	for _, s := range []string{"msg-task-20261121-001-question-and-more", "task-20261121-001", "the basic idea"} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestWriter_CatchesASecretSplitAcrossWrites(t *testing.T) {
	t.Setenv("GH_TOKEN", "split-secret-value-42")
	var out bytes.Buffer
	w := NewWriter(&out)
	w.Write([]byte(`{"env":"split-sec`))
	w.Write([]byte("ret-value-42\"}\nnext line "))
	w.Write([]byte("split-secret-value-42"))
	if strings.Contains(out.String(), "next line") {
		t.Errorf("a partial line was written before its end: %q", out.String())
	}
	w.Close()
	if got := out.String(); strings.Contains(got, "split-secret-value-42") || strings.Count(got, Marker) != 2 {
		t.Errorf("written %q", got)
	}
}

func TestCleanEnv_DropsSecretVariables(t *testing.T) {
	SetExtraNames([]string{"MY_DB_PASSWORD"})
	defer SetExtraNames(nil)
	got := CleanEnv([]string{"PATH=/bin", "GH_TOKEN=x", "SLACK_BOT_TOKEN=y", "JIRA_API_TOKEN=z", "MY_DB_PASSWORD=w", "HOME=/root", "SLACK_DEFAULT_CHANNEL=C1"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/root SLACK_DEFAULT_CHANNEL=C1" {
		t.Errorf("CleanEnv = %v", got)
	}
}

func TestJSON_KeepsNumbersAndRedactsStrings(t *testing.T) {
	t.Setenv("GH_TOKEN", "json-secret-value-77")
	got := string(JSON([]byte(`{"n": 12345678901234567890, "s": "x json-secret-value-77 y", "l": ["json-secret-value-77"]}` + "\n")))
	if strings.Contains(got, "json-secret-value-77") || !strings.Contains(got, "12345678901234567890") || !strings.HasSuffix(got, "}\n") {
		t.Errorf("JSON = %s", got)
	}
}

// FuzzString: whatever surrounds a secret value, it never survives, and
// valid UTF-8 stays valid.
func FuzzString(f *testing.F) {
	f.Add("before ", "after", []byte("a-secret-value"))
	f.Add("token=", "&x=1", []byte("ghp_000000000000000000000"))
	f.Add("", "", []byte("xxxxxx"))
	f.Add("ééé", "\x00\n", []byte("aaaaaaaaaaaaaaaa"))
	f.Fuzz(func(t *testing.T, pre, post string, raw []byte) {
		// Secrets are tokens: letters, digits, - and _.
		const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
		sec := make([]byte, 0, len(raw))
		for _, c := range raw {
			sec = append(sec, alpha[int(c)%len(alpha)])
		}
		if len(sec) < MinValueLen || len(sec) > 200 || strings.Contains(Marker, string(sec)) {
			return // a "secret" inside the marker itself cannot be told apart
		}
		t.Setenv("GH_TOKEN", string(sec))
		in := pre + string(sec) + post
		got := String(in)
		if strings.Contains(got, string(sec)) {
			t.Fatalf("String(%q) = %q keeps the secret", in, got)
		}
		if utf8.ValidString(in) && !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q is not valid UTF-8", in, got)
		}
	})
}

// The pre-check skips the regular expressions for text no pattern can
// match — task ids included, which all contain "sk-" — and never for text
// one would change.
func TestMaybeSecret_TaskIdsSkipTheSlowPath(t *testing.T) {
	for _, s := range []string{"task-20261121-001", `{"msg_id":"msg-task-20261121-001-start","task_id":"task-20261121-001","channel":"C1"}`,
		"proclamation-task-20261121-001", "desk-top risk-free"} {
		if MaybeSecret(s) {
			t.Errorf("MaybeSecret(%q) = true, want false", s)
		}
	}
	corpus := []string{"sk-ant-x", "task-ant-x", "sk-proj-abcdefghijklmnopqrstuvwxyz", "mask-proj-abcdefghijklmnopqrst",
		"sk-abcdefghijklmnopqrst", "sk-abcdefghijklmnopqrs", "task-ABCDEFGHIJKLMNOPQRSTUV", "task-20261121-001 sk-ant-api03-z",
		"sk-", "sk-sk-ant-1", "a sk-proj-short", "risk-free sk-12345678901234567890xyz"}
	for _, s := range corpus {
		if want := applyPatterns(s); want != s && !MaybeSecret(s) {
			t.Errorf("MaybeSecret(%q) = false, but the patterns change it to %q", s, want)
		}
		if got, want := String(s), applyPatterns(s); got != want {
			t.Errorf("String(%q) = %q, want %q (the patterns applied)", s, got, want)
		}
	}
}

// Clip keeps n runes and never splits a character.
func TestClip_KeepsRunesWhole(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"한국어 텍스트", 2, "한국…"},
		{"ééé", 3, "ééé"},
		{"", 0, ""},
	} {
		if got := Clip(c.s, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// The PostgreSQL DSN is a secret by its default name (roles that never
// load system.yaml, soldier-spawn among them, still redact it), and a
// DSN's password is redacted wherever it shows, in either DSN form.
func TestString_PostgresDSN(t *testing.T) {
	dsn := "postgres://kingdom:pw-Secret-123@db.example:5432/kingdom?sslmode=require"
	t.Setenv("KINGDOM_PG_DSN", dsn)
	if !IsSecretName("KINGDOM_PG_DSN") {
		t.Fatal("KINGDOM_PG_DSN is not a secret name")
	}
	if got := String("connect " + dsn + ": refused"); strings.Contains(got, "pw-Secret-123") || !strings.Contains(got, Marker) {
		t.Errorf("exact DSN: %q", got)
	}
	cases := map[string]string{
		"dial postgresql://u:hunter2hunter@10.0.0.1/db failed": "dial postgresql://u:" + Marker + "@10.0.0.1/db failed",
		"host=db user=k password=hunter2hunter dbname=k":       "host=db user=k password=" + Marker + " dbname=k",
		// A URL without a password keeps its host, port and path.
		"postgres://db.example:5432/kingdom?application_name=a@b": "postgres://db.example:5432/kingdom?application_name=a@b",
		"postgres://kingdom@db.example/kingdom":                   "postgres://kingdom@db.example/kingdom",
	}
	for in, want := range cases {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every GitHub token form is redacted whole, in running text, in JSON and
// in a URL (SPEC §12.3): the prefixes of GitHub's token types and the
// stateless installation token (ghs_<app id>_<JWT>, ~520 characters, two
// dots, dashes and underscores).
func TestString_EveryGitHubTokenForm(t *testing.T) {
	jwt := "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9." + strings.Repeat("eyJpc3MiOiJnaXRodWIuY29tIiwiaW5zdGFsbGF0aW9uIjox-_", 8) + "." + strings.Repeat("Sig_nat-ure0", 12)
	for _, c := range []struct{ name, tok string }{
		{"classic PAT", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"},
		{"OAuth", "gho_" + "16C7e42F292c6912E7710c838347Ae178B4a"},
		{"user-to-server", "ghu_" + "16C7e42F292c6912E7710c838347Ae178B4a"},
		{"installation (opaque)", "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"},
		{"installation (stateless JWT)", "ghs_123456_" + jwt},
		{"refresh", "ghr_" + "1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498"},
		{"fine-grained PAT", "github_pat_" + "11ABCDEFG0123456789abc_" + strings.Repeat("aB3", 19) + "xY"},
	} {
		for _, text := range []string{
			"token " + c.tok + " leaked",
			`{"auth": "` + c.tok + `"}`,
			"https://x-access-token:" + c.tok + "@github.com/o/r.git",
			c.tok,
		} {
			got := String(text)
			if want := strings.Replace(text, c.tok, Marker, 1); got != want {
				t.Errorf("%s: String(%q) = %q, want %q", c.name, text, got, want)
			}
		}
	}
}

// A configured secret's value is redacted whatever its shape: the known
// names, runtime.secret_env's (SetExtraNames), a value kingdom.env put in
// the environment (SPEC §12.3).
func TestString_EveryConfiguredSecretValue(t *testing.T) {
	SetExtraNames([]string{"DEPLOY_KEY", "GEN_PR_READ_TOKEN"})
	defer SetExtraNames(nil)
	for _, name := range []string{"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "JIRA_API_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN",
		"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "KINGDOM_PG_DSN", "KINGDOM_HTTP_TOKEN", "DEPLOY_KEY", "GEN_PR_READ_TOKEN"} {
		v := "plain-value-of-" + strings.ToLower(name)
		t.Setenv(name, v)
		if got := String("the value is " + v + "."); strings.Contains(got, v) || got != "the value is "+Marker+"." {
			t.Errorf("%s: %q", name, got)
		}
	}
}
