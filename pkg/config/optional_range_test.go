package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Optional numbers (null = none, e.g. the budgets) are range-checked when
// set.
func TestConfig_OptionalNumbersAreRangeChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "king.yaml")
	os.WriteFile(p, []byte("budget:\n  task_usd: -1\n"), 0o600)
	if _, err := LoadKing(p); err == nil || !strings.Contains(err.Error(), "budget.task_usd") {
		t.Fatalf("a negative task budget: %v", err)
	}
	os.WriteFile(p, []byte("budget:\n  daily_usd: 25.5\n  daily_tokens: null\n"), 0o600)
	k, err := LoadKing(p)
	if err != nil || k.Budget.DailyUSD == nil || *k.Budget.DailyUSD != 25.5 || k.Budget.DailyTokens != nil {
		t.Fatalf("valid budgets: %+v, %v", k.Budget, err)
	}
}
