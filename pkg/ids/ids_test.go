package ids

import (
	"math/rand/v2"
	"regexp"
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

// The expressions Valid and ValidGeneral were written from; the hand-written
// checks must agree with them on every input.
var (
	idRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$`)
	generalRE = regexp.MustCompile(`^gen-[a-z][a-z0-9-]*$`)
)

func regexValid(id string) bool       { return idRE.MatchString(id) && !strings.Contains(id, "..") }
func regexValidGeneral(n string) bool { return generalRE.MatchString(n) && len(n) <= 64 }

func agree(t *testing.T, s string) {
	t.Helper()
	if got, want := Valid(s), regexValid(s); got != want {
		t.Fatalf("Valid(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := ValidGeneral(s), regexValidGeneral(s); got != want {
		t.Fatalf("ValidGeneral(%q) = %v, the expression says %v", s, got, want)
	}
}

func TestValid_AgreesWithTheExpressions(t *testing.T) {
	// Short strings over an alphabet of every class edge, exhaustively up
	// to length 3, then random longer ones around the length limits.
	alphabet := []string{"a", "z", "A", "Z", "0", "9", ".", "_", ":", "@", "-", "/", " ", "\n", "\x00", "é", "\xff", "g", "e", "n"}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		agree(t, prefix)
		agree(t, "gen-"+prefix)
		if n == 0 {
			return
		}
		for _, a := range alphabet {
			gen(prefix+a, n-1)
		}
	}
	gen("", 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := rng.IntN(210)
		if rng.IntN(2) == 0 {
			n = 60 + rng.IntN(8)
		}
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		agree(t, s)
		agree(t, "gen-"+s)
	}
	for _, n := range []int{63, 64, 65, 199, 200, 201} {
		agree(t, "gen-"+strings.Repeat("a", n-4))
		agree(t, strings.Repeat("a", n))
		agree(t, strings.Repeat("a.", n/2))
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{"task-20261121-001", "a..b", "gen-pr", "gen-PR", strings.Repeat("x", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { agree(t, s) })
}
