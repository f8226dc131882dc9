package soldier

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestCodexCost_PricedTokensOrNull(t *testing.T) {
	sys := config.DefaultSystem()
	u := &doc.Usage{InputTokens: 1_000_000, CacheReadInputTokens: 2_000_000, OutputTokens: 100_000}
	if c := codexCost(sys, config.EngineCodex, u); c != nil {
		t.Fatalf("unpriced codex cost %v, want null", *c)
	}
	sys.Runtime.Codex.Pricing = &config.CodexPricing{InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10}
	c := codexCost(sys, config.EngineCodex, u)
	if c == nil || *c != 1.25+0.25+1.0 {
		t.Fatalf("cost %v, want 2.5", c)
	}
	if codexCost(sys, config.EngineClaude, u) != nil {
		t.Fatal("claude priced by codex pricing")
	}
}

func TestCodexPricing_LoadsFromSystemYAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "system.yaml")
	os.WriteFile(p, []byte("runtime:\n  codex:\n    pricing: {input_per_mtok: 1.25, cached_input_per_mtok: 0.125, output_per_mtok: 10}\n"), 0o600)
	sys, err := config.LoadSystem(p)
	if err != nil || sys.Runtime.Codex.Pricing == nil || sys.Runtime.Codex.Pricing.OutputPerMTok != 10 {
		t.Fatalf("pricing %+v, err %v", sys, err)
	}
	os.WriteFile(p, []byte("runtime:\n  codex:\n    pricing: {input_per_mtok: -1}\n"), 0o600)
	if _, err := config.LoadSystem(p); err == nil {
		t.Fatal("a negative price loaded")
	}
}

func TestApplyMoney_OnlyEngineFailures(t *testing.T) {
	now := time.Date(2026, 4, 28, 12, 0, 0, 0, time.UTC)
	limited := &engine.Outcome{Signals: []engine.Signal{{Kind: "result",
		Raw: []byte(`{"type":"result","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1777400000"}`)}}}
	agent := map[string]any{"status": "failed", "error_reason": doc.ReasonAgentFailed, "error": "tests fail"}
	if applyMoney(agent, "claude", limited, "", now, time.Hour) || agent["error_reason"] != doc.ReasonAgentFailed {
		t.Fatalf("an agent's own failure was rewritten: %v", agent)
	}
	ok := map[string]any{"status": "success"}
	if applyMoney(ok, "claude", limited, "", now, time.Hour) {
		t.Fatal("a success was rewritten")
	}
	eng := map[string]any{"status": "failed", "error_reason": doc.ReasonEngineError, "error": "x", "terminal": true}
	if !applyMoney(eng, "claude", limited, "", now, time.Hour) || eng["error_reason"] != doc.ReasonUsageLimited ||
		eng["resets_at"] != "2026-04-28T18:13:20Z" || eng["terminal"] != nil {
		t.Fatalf("engine failure on a limit: %v", eng)
	}
	plain := map[string]any{"status": "failed", "error_reason": doc.ReasonEngineError, "error": "boom"}
	if applyMoney(plain, "claude", &engine.Outcome{}, "segfault", now, time.Hour) {
		t.Fatalf("an engine failure without a limit was rewritten: %v", plain)
	}
	budget := map[string]any{"status": "failed", "error_reason": doc.ReasonNoResult, "error": "x"}
	if !applyMoney(budget, "claude", &engine.Outcome{Subtype: "error_max_budget_usd"}, "", now, time.Hour) ||
		budget["error_reason"] != doc.ReasonBudgetExceeded || budget["terminal"] != true {
		t.Fatalf("error_max_budget_usd: %v", budget)
	}
}

func TestTaskBudget_ManifestOverridesKing(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	if taskBudget(l, loadManifest(l, "gen-x")) != nil {
		t.Fatal("a budget without any config")
	}
	os.WriteFile(l.ConfigFile("king.yaml"), []byte("budget:\n  task_usd: 0.5\n"), 0o600)
	if b := taskBudget(l, loadManifest(l, "gen-x")); b == nil || *b != 0.5 {
		t.Fatalf("king task_usd: %v", b)
	}
	os.WriteFile(l.GeneralManifest("gen-x"), []byte("name: gen-x\ndescription: x\nbudget_usd: 0.1\n"), 0o600)
	if b := taskBudget(l, loadManifest(l, "gen-x")); b == nil || *b != 0.1 {
		t.Fatalf("manifest budget_usd: %v", b)
	}
}

// A command engine's output is the agent's own (any tool it runs prints
// there): a "Quota exceeded" in it must not pause the engine or re-queue
// the task; only claude's and codex's own output is classified.
func TestApplyMoney_CommandOutputIsNotALimit(t *testing.T) {
	now := time.Date(2026, 4, 28, 12, 0, 0, 0, time.UTC)
	line := []byte(`{"type":"result","is_error":true,"api_error_status":429,"result":"Claude AI usage limit reached|1777400000"}`)
	po := &engine.Outcome{Signals: []engine.Signal{{Kind: "result", Raw: line}}}
	for _, stderr := range []string{"Quota exceeded. Try again in 5 minutes.", "You've hit your usage limit · resets 3am (UTC)"} {
		raw := map[string]any{"status": "failed", "error_reason": doc.ReasonEngineError, "error": "exit 1"}
		if applyMoney(raw, config.EngineCommand, po, stderr, now, time.Hour) || raw["error_reason"] != doc.ReasonEngineError {
			t.Fatalf("command engine output %q taken as a usage limit: %v", stderr, raw)
		}
	}
	// The same words from codex itself still are one.
	raw := map[string]any{"status": "failed", "error_reason": doc.ReasonEngineError, "error": "exit 1"}
	if !applyMoney(raw, config.EngineCodex, &engine.Outcome{}, "ERROR: Quota exceeded. Try again in 5 minutes.", now, time.Hour) ||
		raw["error_reason"] != doc.ReasonUsageLimited {
		t.Fatalf("codex's own limit text not classified: %v", raw)
	}
}
