package health_test

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/health"
)

// TestAdmit_Table is SPEC §4.4 / §9.18 written out: 4 health levels × 3
// priorities × 4 token statuses.
func TestAdmit_Table(t *testing.T) {
	const (
		G, Y, O, R = health.Green, health.Yellow, health.Orange, health.Red
		ok, warn   = health.TokenOK, health.TokenWarning
		crit, unk  = health.TokenCritical, health.TokenUnknown
		hi, no, lo = "high", "normal", "low"
	)
	cases := []struct {
		health, token, priority string
		want                    bool
	}{
		// green: health admits all; tokens decide.
		{G, ok, hi, true}, {G, ok, no, true}, {G, ok, lo, true},
		{G, warn, hi, true}, {G, warn, no, true}, {G, warn, lo, true},
		{G, crit, hi, true}, {G, crit, no, false}, {G, crit, lo, false},
		{G, unk, hi, true}, {G, unk, no, true}, {G, unk, lo, true},
		// yellow: only high, whatever the tokens.
		{Y, ok, hi, true}, {Y, ok, no, false}, {Y, ok, lo, false},
		{Y, warn, hi, true}, {Y, warn, no, false}, {Y, warn, lo, false},
		{Y, crit, hi, true}, {Y, crit, no, false}, {Y, crit, lo, false},
		{Y, unk, hi, true}, {Y, unk, no, false}, {Y, unk, lo, false},
		// orange: nothing.
		{O, ok, hi, false}, {O, ok, no, false}, {O, ok, lo, false},
		{O, warn, hi, false}, {O, warn, no, false}, {O, warn, lo, false},
		{O, crit, hi, false}, {O, crit, no, false}, {O, crit, lo, false},
		{O, unk, hi, false}, {O, unk, no, false}, {O, unk, lo, false},
		// red: nothing.
		{R, ok, hi, false}, {R, ok, no, false}, {R, ok, lo, false},
		{R, warn, hi, false}, {R, warn, no, false}, {R, warn, lo, false},
		{R, crit, hi, false}, {R, crit, no, false}, {R, crit, lo, false},
		{R, unk, hi, false}, {R, unk, no, false}, {R, unk, lo, false},
	}
	if len(cases) != 48 {
		t.Fatalf("table has %d cases, want 48", len(cases))
	}
	for _, c := range cases {
		t.Run(c.health+"/"+c.token+"/"+c.priority, func(t *testing.T) {
			got := health.Admit(c.health, c.token, c.priority)
			if got != c.want {
				t.Errorf("Admit(%s, %s, %s) = %v, want %v", c.health, c.token, c.priority, got, c.want)
			}
			reason := health.DenyReason(c.health, c.token, c.priority)
			if (reason == "") != c.want {
				t.Errorf("DenyReason = %q, disagrees with Admit = %v", reason, got)
			}
		})
	}
}

func TestAdmit_UnknownValuesFailSafe(t *testing.T) {
	// An unreadable health level admits nothing.
	for _, h := range []string{"", "purple"} {
		if health.Admit(h, health.TokenOK, "high") {
			t.Errorf("Admit(%q, ok, high) = true, want false", h)
		}
	}
	// An unrecognized token status is unknown, which counts as ok.
	if !health.Admit(health.Green, "", "low") || !health.Admit(health.Green, "weird", "normal") {
		t.Error("unrecognized token status should let health decide")
	}
	// An unrecognized priority is not high.
	if health.Admit(health.Yellow, health.TokenOK, "urgent") || !health.Admit(health.Green, health.TokenOK, "") {
		t.Error("unknown priority: want refused on yellow, admitted on green")
	}
}

func TestDenyReason_NamesTheRule(t *testing.T) {
	for _, c := range []struct{ h, tok, p, want string }{
		{health.Yellow, health.TokenOK, "normal", `health yellow admits only high priority, not "normal"`},
		{health.Orange, health.TokenOK, "high", "health orange admits nothing"},
		{health.Green, health.TokenCritical, "low", `token budget critical admits only high priority, not "low"`},
	} {
		if got := health.DenyReason(c.h, c.tok, c.p); got != c.want {
			t.Errorf("DenyReason(%s, %s, %s) = %q, want %q", c.h, c.tok, c.p, got, c.want)
		}
	}
}
