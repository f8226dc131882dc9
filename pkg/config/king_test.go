package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The brakes' defaults (SPEC §12.4), as the shipped king.yaml states them.
func TestKing_BreakerDefaults(t *testing.T) {
	b := DefaultKing().Breaker
	want := KingBreaker{NoProgressMinutes: 20, MaxAttemptsPerItem: 8, ItemWindowHours: 24, FailureThreshold: 5, ParkMinutes: 60}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("breaker defaults = %+v, want %+v", b, want)
	}
	k := DefaultKing()
	if k.NoProgressLimit() != 20*time.Minute || k.ItemWindow() != 24*time.Hour || k.ParkDuration() != time.Hour {
		t.Errorf("durations: %v %v %v", k.NoProgressLimit(), k.ItemWindow(), k.ParkDuration())
	}
	shipped, err := LoadKing(filepath.Join("..", "..", "config", KingFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shipped.Breaker, want) {
		t.Errorf("config/king.yaml breaker = %+v, want the defaults %+v", shipped.Breaker, want)
	}
}

func TestKing_BreakerKeysLoadAndBurnCapsAreOptional(t *testing.T) {
	p := writeFile(t, t.TempDir(), KingFile, "breaker:\n  burn_usd: 2.5\n  burn_tokens: 500000\n  max_attempts_per_item: 0\n  park_minutes: 15\n")
	k, err := LoadKing(p)
	if err != nil {
		t.Fatal(err)
	}
	b := k.Breaker
	if b.BurnUSD == nil || *b.BurnUSD != 2.5 || b.BurnTokens == nil || *b.BurnTokens != 500000 {
		t.Errorf("burn caps = %v %v", b.BurnUSD, b.BurnTokens)
	}
	if b.MaxAttemptsPerItem != 0 || b.ParkMinutes != 15 || b.FailureThreshold != 5 {
		t.Errorf("breaker = %+v", b)
	}
	if d := DefaultKing().Breaker; d.BurnUSD != nil || d.BurnTokens != nil {
		t.Errorf("burn caps are off by default: %v %v", d.BurnUSD, d.BurnTokens)
	}
}

func TestKing_BreakerRangesRefused(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"breaker:\n  no_progress_minutes: 0\n", ":2: breaker.no_progress_minutes: expected an integer from 1 to 1440, got 0"},
		{"breaker:\n  item_window_hours: 0\n", ":2: breaker.item_window_hours: expected an integer from 1 to 720, got 0"},
		{"breaker:\n  park_minutes: 20000\n", ":2: breaker.park_minutes: expected an integer from 1 to 10080, got 20000"},
		{"breaker:\n  failure_threshold: -1\n", ":2: breaker.failure_threshold: expected an integer from 0 to 1000, got -1"},
		{"breaker:\n  max_attempts_per_item: 5000\n", ":2: breaker.max_attempts_per_item: expected an integer from 0 to 1000, got 5000"},
		{"breaker:\n  burn_usd: 0\n", "breaker.burn_usd"},
		{"breaker:\n  burn_tokens: 10\n", "breaker.burn_tokens"},
	} {
		p := writeFile(t, t.TempDir(), KingFile, c.body)
		if _, err := LoadKing(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want it to contain %q", c.body, err, c.want)
		}
	}
}
