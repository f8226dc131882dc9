package chamberlain

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

func TestReadTokens_Fixtures(t *testing.T) {
	c := config.DefaultChamberlain() // budget 300, warning 70 %, critical 90 %, $15 / $75 per MTok
	cases := []struct {
		file   string
		status string
		cost   float64
		in     int64
		out    int64
		err    bool
	}{
		// 1,000,000 tokens today: 700k in ($10.50) + 300k out ($22.50); yesterday ignored.
		{"ok.json", TokenOK, 33, 700000, 300000, false},
		// 7M → $231 ≥ $210
		{"warning.json", TokenWarning, 231, 4900000, 2100000, false},
		// 9M → $297 ≥ $270
		{"critical.json", TokenCritical, 297, 6300000, 2700000, false},
		{"missing.json", TokenUnknown, 0, 0, 0, true},
		{"corrupt.json", TokenUnknown, 0, 0, 0, true},
	}
	for _, tc := range cases {
		got, err := ReadTokens(filepath.Join("testdata", "stats-cache", tc.file), "2026-11-21", c)
		if (err != nil) != tc.err {
			t.Errorf("%s: err = %v", tc.file, err)
		}
		if got.Status != tc.status || got.DailyCostUSD != tc.cost || got.DailyInputTokens != tc.in || got.DailyOutputTokens != tc.out {
			t.Errorf("%s: %+v, want %s $%.2f %d/%d", tc.file, got, tc.status, tc.cost, tc.in, tc.out)
		}
	}
	c.TokenLimits.Enabled = false
	if got, err := ReadTokens(filepath.Join("testdata", "stats-cache", "critical.json"), "2026-11-21", c); err != nil || got.Status != TokenUnknown {
		t.Errorf("disabled: %+v %v", got, err)
	}
}

func TestTokens_StatusChangeAndDailyReset(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	stats := filepath.Join(e.l.Base, "stats-cache.json")
	e.cfg.Chamberlain.TokenLimits.StatsPath = stats
	copyFixture := func(name string) {
		b, err := os.ReadFile(filepath.Join("testdata", "stats-cache", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, stats, string(b))
	}
	copyFixture("ok.json")
	r := e.role(ModeDaemon)
	e.tick(r)
	if n := len(e.events("system.token_status_changed")); n != 0 {
		t.Fatalf("token_status_changed on a first ok: %d", n)
	}
	copyFixture("warning.json")
	e.clk.Advance(time.Minute) // monitoring_interval_seconds is 60
	e.tick(r)
	tc := e.events("system.token_status_changed")
	if len(tc) != 1 {
		t.Fatalf("token_status_changed = %d, want 1", len(tc))
	}
	if d := dataOf(t, tc[0]); d["from"] != TokenOK || d["to"] != TokenWarning || d["daily_cost_usd"] != 231.0 {
		t.Fatalf("data = %v", d)
	}
	if r.Last.Resources.Tokens.Status != TokenWarning {
		t.Fatalf("resources tokens = %+v", r.Last.Resources.Tokens)
	}
	// Midnight: the new day has no tokens yet.
	e.clk.Set(time.Date(2026, 11, 22, 0, 0, 30, 0, time.Local))
	e.tick(r)
	br := e.events("system.token_budget_reset")
	if len(br) != 1 {
		t.Fatalf("token_budget_reset = %d, want 1", len(br))
	}
	if d := dataOf(t, br[0]); d["date"] != "2026-11-22" || d["previous_cost"] != 231.0 {
		t.Fatalf("reset data = %v", d)
	}
	if n := len(e.events("system.token_status_changed")); n != 2 {
		t.Fatalf("token_status_changed = %d, want 2 (warning → ok)", n)
	}
}
