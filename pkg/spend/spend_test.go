package spend

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func f(v float64) *float64 { return &v }

func TestAdmit_Table(t *testing.T) {
	daily := Budget{DailyUSD: f(1.00)}
	cases := []struct {
		name     string
		spent    float64
		tokens   int64
		b        Budget
		task     *float64
		priority string
		want     bool
	}{
		{"no budget admits", 500, 0, Budget{}, f(10), "low", true},
		{"normal fits", 0.80, 0, daily, f(0.10), "normal", true},
		{"normal exactly fits", 0.90, 0, daily, f(0.10), "normal", true},
		{"normal would pass", 0.95, 0, daily, f(0.10), "normal", false},
		{"low would pass", 0.95, 0, daily, f(0.10), "low", false},
		{"high below 100%", 0.95, 0, daily, f(0.10), "high", true},
		{"high at 100%", 1.00, 0, daily, f(0.10), "high", false},
		{"normal without a task budget below 100%", 0.99, 0, daily, nil, "normal", true},
		{"tokens past the budget", 0, 2000, Budget{DailyTokens: ptr64(1000)}, nil, "high", false},
		{"tokens below the budget", 0, 500, Budget{DailyTokens: ptr64(1000)}, f(5), "normal", true},
		{"zero budget admits nothing", 0, 0, Budget{DailyUSD: f(0)}, nil, "high", false},
		{"damaged ledger holds high", 0.10, 0, daily, f(0.10), "high", false},
		{"damaged ledger holds a token budget", 0, 10, Budget{DailyTokens: ptr64(1000)}, nil, "low", false},
		{"damaged ledger without a budget admits", 0, 0, Budget{}, f(0.10), "normal", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tot := Totals{CostUSD: c.spent, Tokens: c.tokens}
			if strings.HasPrefix(c.name, "damaged") {
				tot.Damaged = 1
			}
			s := Evaluate("2026-11-21", tot, c.b)
			got, why := Admit(s, c.task, c.priority)
			if got != c.want {
				t.Fatalf("admit = %v (%s), want %v", got, why, c.want)
			}
			if !got && why == "" {
				t.Fatal("a refusal without a reason")
			}
		})
	}
}

func ptr64(n int64) *int64 { return &n }

func TestEvaluate_Thresholds(t *testing.T) {
	for _, c := range []struct {
		spent          float64
		warn, exceeded bool
	}{{0.79, false, false}, {0.80, true, false}, {0.99, true, false}, {1.0, true, true}, {3, true, true}} {
		s := Evaluate("d", Totals{CostUSD: c.spent}, Budget{DailyUSD: f(1)})
		if s.Warning != c.warn || s.Exceeded != c.exceeded {
			t.Errorf("spent %.2f: warning %v exceeded %v, want %v %v", c.spent, s.Warning, s.Exceeded, c.warn, c.exceeded)
		}
	}
}

// A day holds each attempt once, sums in one order, per general and
// engine and per task, with unpriced attempts counted apart.
func TestDay_PutOnceRecordLoadSummary(t *testing.T) {
	days := StoreDays(storeKV(t))
	d, err := days.Load(t.Context(), day)
	if err != nil || len(d.Attempts) != 0 {
		t.Fatalf("empty day: %v %v", d, err)
	}
	if !d.Put(Key("task-1", 0, "s1"), Entry{Task: "task-1", General: "gen-a", Engine: "claude", CostUSD: f(0.1), Usage: Usage{InputTokens: 10}}) {
		t.Fatal("first put refused")
	}
	if d.Put(Key("task-1", 0, "s1"), Entry{Task: "task-1", CostUSD: f(9)}) {
		t.Fatal("a repeated key was recorded twice")
	}
	d.Put(Key("task-1", 1, "s2"), Entry{Task: "task-1", General: "gen-a", Engine: "claude", CostUSD: f(0.2), Usage: Usage{OutputTokens: 5}})
	d.Put(Key("task-2", 0, "s3"), Entry{Task: "task-2", General: "gen-b", Engine: "codex", Usage: Usage{CacheReadInputTokens: 7}})
	keys := d.keys("")
	entries := make([]Entry, len(keys))
	for i, k := range keys {
		entries[i] = d.Attempts[k]
	}
	if n, err := days.Open(t.Context(), day).Record(keys, entries); err != nil || n != 3 {
		t.Fatalf("record: %d, %v", n, err)
	}
	d2, err := days.Load(t.Context(), day)
	if err != nil {
		t.Fatal(err)
	}
	s := d2.Summary()
	if s.Totals.CostUSD != 0.3 || s.Totals.Attempts != 3 || s.Totals.Unpriced != 1 || s.Totals.Tokens != 22 {
		t.Errorf("totals %+v", s.Totals)
	}
	if s.Generals["gen-a"].CostUSD != 0.3 || s.Engines["codex"].Tokens != 7 {
		t.Errorf("per general/engine %+v %+v", s.Generals, s.Engines)
	}
	if tt := d2.TaskTotals("task-1"); tt.Attempts != 2 || tt.CostUSD != 0.3 {
		t.Errorf("task totals %+v", tt)
	}
}

func entry(task string, cost float64) Entry {
	return Entry{Task: task, General: "gen-pr", Engine: "claude", CostUSD: f(cost), Status: "success",
		Usage: Usage{InputTokens: 10, OutputTokens: 5}, At: "2026-11-21T10:00:00Z"}
}

// A task's totals span the local days from its creation to now, each day
// asked once, at most maxDays back; Priced is null when nothing was priced.
func TestTaskTotals_DaysOfTheTaskOnceEachWithinTheBound(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.Local)
	var asked []string
	day := func(date string) Totals {
		asked = append(asked, date)
		return Totals{CostUSD: 0.5, Attempts: 1}
	}
	tot := TaskTotals(now.Add(-49*time.Hour), now, 8, day)
	if want := []string{"2026-11-22", "2026-11-23", "2026-11-24"}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	if p := tot.Priced(); p == nil || *p != 1.5 {
		t.Errorf("priced %v, want 1.5", p)
	}
	asked = nil
	TaskTotals(now.Add(-30*24*time.Hour), now, 3, day)
	if len(asked) != 3 || asked[2] != "2026-11-24" {
		t.Errorf("a month-old task asked %v, want the last 3 days", asked)
	}
	if (Totals{Attempts: 2, Unpriced: 2, Tokens: 9}).Priced() != nil || (Totals{}).Priced() != nil {
		t.Error("unpriced or empty totals have a price")
	}
}
