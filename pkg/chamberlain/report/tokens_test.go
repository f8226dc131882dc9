package report

import (
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/spend"
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
		{"ok.json", health.TokenOK, 33, 700000, 300000, false},
		// 7M → $231 ≥ $210
		{"warning.json", health.TokenWarning, 231, 4900000, 2100000, false},
		// 9M → $297 ≥ $270
		{"critical.json", health.TokenCritical, 297, 6300000, 2700000, false},
		// Counts past any real day (their float sum is +Inf) are bounded:
		// MaxTokens in all, its cost past MaxUSD counts as MaxUSD.
		{"absurd.json", health.TokenCritical, spend.MaxUSD, 7e11, 3e11, false},
		{"missing.json", health.TokenUnknown, 0, 0, 0, true},
		{"corrupt.json", health.TokenUnknown, 0, 0, 0, true},
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
	if got, err := ReadTokens(filepath.Join("testdata", "stats-cache", "critical.json"), "2026-11-21", c); err != nil || got.Status != health.TokenUnknown {
		t.Errorf("disabled: %+v %v", got, err)
	}
}
