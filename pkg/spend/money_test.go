package spend

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/schema"
)

func TestAddUSD_ClampsAndSaturates(t *testing.T) {
	for _, c := range []struct {
		name    string
		a, b, w float64
	}{
		{"nano-dollar rounding", 0.95, 0.10, 1.05},
		{"NaN counts as zero", 1, math.NaN(), 1},
		{"negative counts as zero", 1, -5, 1},
		{"absurd figure counts as the bound", 0.5, 1e300, MaxUSD},
		{"+Inf counts as the bound", 0, math.Inf(1), MaxUSD},
		{"-Inf counts as zero", 2, math.Inf(-1), 2},
		{"sum saturates", MaxUSD - 1, 5, MaxUSD},
	} {
		if got := AddUSD(c.a, c.b); got != c.w {
			t.Errorf("%s: AddUSD(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.w)
		}
	}
	if got := AddTokens(MaxTokens, MaxTokens); got != MaxTokens {
		t.Errorf("AddTokens saturates at %v, got %v", int64(MaxTokens), got)
	}
	if got := AddTokens(-7, 5); got != 5 {
		t.Errorf("AddTokens(-7, 5) = %d, want 5", got)
	}
	if got := AddTokens(math.MaxInt64, math.MaxInt64); got != MaxTokens {
		t.Errorf("AddTokens(MaxInt64, MaxInt64) = %d, want the bound (no overflow)", got)
	}
	if MaxUSD != schema.MaxCostUSD || MaxTokens != schema.MaxTokens {
		t.Error("spend's bounds differ from the schemas'")
	}
}

// One attempt claiming 1e300 dollars used to turn the day's total into
// +Inf (which no JSON file can carry, so every summary write failed); it
// now counts as MaxUSD, and later attempts still add up.
func TestLedger_AbsurdCostSaturatesTheDay(t *testing.T) {
	j := StoreDays(storeKV(t)).Open(t.Context(), day)
	absurd := entry("task-a", 1e300)
	absurd.Usage = Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}
	if _, err := j.Record([]string{"task-a#0#s1", "task-b#0#s2"}, []Entry{absurd, entry("task-b", 0.5)}); err != nil {
		t.Fatal(err)
	}
	s := j.Summary()
	if s.Totals.CostUSD != MaxUSD || s.Totals.Tokens != MaxTokens || s.Generals["gen-pr"].CostUSD != MaxUSD {
		t.Errorf("totals %+v, want saturated at $%v and %v tokens", s.Totals, MaxUSD, int64(MaxTokens))
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("the day's summary cannot be written: %v", err)
	}
	st := Evaluate(s.Date, s.Totals, Budget{DailyUSD: f(20)})
	if math.IsInf(st.Ratio, 0) || math.IsNaN(st.Ratio) || !st.Exceeded {
		t.Errorf("status %+v, want a finite ratio past the budget", st)
	}
	var tot Totals
	tot.Merge(s.Totals)
	tot.Merge(s.Totals)
	if tot.CostUSD != MaxUSD || tot.Tokens != MaxTokens {
		t.Errorf("merged totals %+v, want saturated", tot)
	}
}
