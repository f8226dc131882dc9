package envoy

import (
	"os"
	"strings"
	"testing"
)

// An adversarial title: an @channel ping and a link
// whose text lies about where it goes.
const evilTitle = "Fix typo <!channel> & <@U0ADMIN> <https://evil.example|https://github.com/login>"

// SPEC §10.13, §10.14: outside text reaches Slack
// and the console escaped and redacted, with our own emoji kept.
func TestOutbound_OutsideTextIsEscapedAndRedactedOurMarkupKept(t *testing.T) {
	const token = "ghp_abcdefghijklmnopqrstuvwxyz012345"
	t.Setenv("JIRA_API_TOKEN", "jira-exact-secret-value")
	content := "❌ gen-pr failed " + task + ": " + evilTitle + " env GH_TOKEN=" + token + " jira jira-exact-secret-value"
	wantBody := "gen-pr failed " + task + ": Fix typo &lt;!channel&gt; &amp; &lt;@U0ADMIN&gt; &lt;https://evil.example|https://github.com/login&gt;"
	check := func(t *testing.T, got string) {
		t.Helper()
		if !strings.HasPrefix(got, "❌ ") {
			t.Errorf("our emoji is gone: %q", got)
		}
		if !strings.Contains(got, wantBody) {
			t.Errorf("text = %q\nwant it to contain %q", got, wantBody)
		}
		if strings.ContainsAny(got, "<>") {
			t.Errorf("raw < or > reached the text: %q", got)
		}
		for _, s := range []string{token, "jira-exact-secret-value"} {
			if strings.Contains(got, s) {
				t.Errorf("secret %q reached the text: %q", s, got)
			}
		}
	}
	final := func() map[string]any {
		m := message("msg-"+task+"-failed", "notification", task)
		m["content"] = content
		m["final"] = "failed"
		return m
	}

	t.Run("slack", func(t *testing.T) {
		h := newHarness(t, setup{})
		h.put(final())
		h.tick()
		calls := h.fake.Calls("chat.postMessage")
		if len(calls) != 1 {
			t.Fatalf("postMessage calls = %d, want 1", len(calls))
		}
		check(t, calls[0].Form.Get("text"))
	})
	t.Run("console", func(t *testing.T) {
		h := newHarness(t, setup{console: true})
		h.put(final())
		h.tick()
		b, err := os.ReadFile(h.l.EnvoyConsoleLog())
		if err != nil {
			t.Fatal(err)
		}
		var body string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "    ") {
				body += strings.TrimPrefix(line, "    ")
			}
		}
		check(t, body)
		if strings.Contains(h.stdout.String(), token) {
			t.Errorf("the console's stdout shows the token")
		}
	})
}

// FuzzEscapeText: escaped text has no < or >, every & starts one of our
// three entities, and unescaping gives the input back.
func FuzzEscapeText(f *testing.F) {
	f.Add(evilTitle)
	f.Add("&amp; &lt; already escaped")
	f.Add("<!here|here> <#C123> <mailto:a@b|x>")
	f.Add("")
	unescape := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
	f.Fuzz(func(t *testing.T, s string) {
		got := EscapeText(s)
		if strings.ContainsAny(got, "<>") {
			t.Fatalf("EscapeText(%q) = %q keeps < or >", s, got)
		}
		for i := strings.IndexByte(got, '&'); i >= 0; {
			rest := got[i:]
			if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
				t.Fatalf("EscapeText(%q) = %q has a bare &", s, got)
			}
			j := strings.IndexByte(got[i+1:], '&')
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if back := unescape.Replace(got); back != s {
			t.Fatalf("unescape(EscapeText(%q)) = %q", s, back)
		}
	})
}
