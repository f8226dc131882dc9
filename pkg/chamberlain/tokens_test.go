package chamberlain

import (
	"github.com/kingdom-dev/kingdom/pkg/health"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTokens_StatusChangeAndDailyReset(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	stats := filepath.Join(e.l.Base, "stats-cache.json")
	e.cfg.Chamberlain.TokenLimits.StatsPath = stats
	copyFixture := func(name string) {
		b, err := os.ReadFile(filepath.Join("report", "testdata", "stats-cache", name))
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
	if d := dataOf(t, tc[0]); d["from"] != health.TokenOK || d["to"] != health.TokenWarning || d["daily_cost_usd"] != 231.0 {
		t.Fatalf("data = %v", d)
	}
	if r.Last.Resources.Tokens.Status != health.TokenWarning {
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
