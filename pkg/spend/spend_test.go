package spend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestLedger_PutOnceSaveLoadSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend", "2026-11-21.json")
	d, err := Load(path, "2026-11-21")
	if err != nil || len(d.Attempts) != 0 {
		t.Fatalf("missing ledger: %v %v", d, err)
	}
	if !d.Put(Key("task-1", 0, "s1"), Entry{Task: "task-1", General: "gen-a", Engine: "claude", CostUSD: f(0.1), Usage: Usage{InputTokens: 10}}) {
		t.Fatal("first put refused")
	}
	if d.Put(Key("task-1", 0, "s1"), Entry{Task: "task-1", CostUSD: f(9)}) {
		t.Fatal("a repeated key was recorded twice")
	}
	d.Put(Key("task-1", 1, "s2"), Entry{Task: "task-1", General: "gen-a", Engine: "claude", CostUSD: f(0.2), Usage: Usage{OutputTokens: 5}})
	d.Put(Key("task-2", 0, "s3"), Entry{Task: "task-2", General: "gen-b", Engine: "codex", Usage: Usage{CacheReadInputTokens: 7}})
	if err := Save(path, d); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(JournalPath(path)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ledger mode: %v %v", st, err)
	}
	d2, err := Load(path, "2026-11-21")
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
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil { // an earlier version's snapshot
		t.Fatal(err)
	}
	d3, err := Load(path, "2026-11-21")
	if !errors.Is(err, ErrDamaged) || d3.Summary().Totals.Attempts != 3 || d3.Damaged != 1 {
		t.Errorf("a corrupt snapshot beside the ledger: %v, %+v; want ErrDamaged, the ledger's 3 attempts and 1 damaged", err, d3.Summary().Totals)
	}
}
