package ids

import (
	"strings"
	"testing"
	"time"
)

func TestValid(t *testing.T) {
	for id, want := range map[string]bool{
		"task-20261121-001":                   true,
		"evt-slack-reply-1700-000100-1700-02": true,
		"evt-github-7001-20261121120000":      true,
		"a:b@c.d":                             true,
		"":                                    false,
		"../etc/passwd":                       false,
		"a/b":                                 false,
		"a..b":                                false,
		".hidden":                             false,
		"-dash-first":                         false,
		"sp ace":                              false,
		"nul\x00byte":                         false,
		strings.Repeat("x", 200):              true,
		strings.Repeat("x", 201):              false,
	} {
		if got := Valid(id); got != want {
			t.Errorf("Valid(%q) = %v, want %v", id, got, want)
		}
		if (Check(id) == nil) != want {
			t.Errorf("Check(%q) disagrees with Valid", id)
		}
	}
}

func TestValidGeneralAndHelpers(t *testing.T) {
	for name, want := range map[string]bool{"gen-pr": true, "gen-a1-b": true, "gen-": false, "gen-PR": false, "pr": false, "gen-1x": false} {
		if got := ValidGeneral(name); got != want {
			t.Errorf("ValidGeneral(%q) = %v, want %v", name, got, want)
		}
	}
	if got := SlackTS("1700000000.000200"); got != "1700000000-000200" {
		t.Errorf("SlackTS = %q", got)
	}
	s := Soldier(time.Unix(1795263000, 0))
	if !strings.HasPrefix(s, "soldier-1795263000-") || !Valid(s) || Soldier(time.Unix(1795263000, 0)) == s {
		t.Errorf("Soldier = %q: want soldier-<unix>-<random>, valid, and unique", s)
	}
}
