package soldier

import (
	"os"
	"path/filepath"

	"math"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Money and limits, the soldier's side (SPEC §10.7, §10.8): claude gets the
// task's budget as --max-budget-usd and a run it stopped for the budget is
// BudgetExceeded (terminal); a run the engine ended on a usage limit is
// published as failed with error_reason UsageLimited and resets_at, which
// the king turns into a pause instead of a failure; a run ended by the
// server's rate limit (a 429 naming no usage limit) is run again after a
// backoff inside the attempt, never a pause (SPEC §12.4).

// loadManifest is the general's manifest, nil when it does not load (a
// petition's, a test's general with no file).
func loadManifest(l layout.Layout, general string) *config.Manifest {
	if general == "" {
		return nil
	}
	m, err := config.LoadManifest(l.GeneralManifest(general))
	if err != nil {
		return nil
	}
	return m
}

// taskBudget is the general's budget_usd (m may be nil), else king.yaml
// budget.task_usd; nil when neither is set or the files do not load (the
// king's admission already reported a broken king.yaml; no backstop is
// better than none started).
func taskBudget(l layout.Layout, m *config.Manifest) *float64 {
	if m != nil && m.BudgetUSD != nil {
		return m.BudgetUSD
	}
	if k, err := config.LoadKing(l.ConfigFile(config.KingFile)); err == nil {
		return k.Budget.TaskUSD
	}
	return nil
}

// engineFailure reports whether a failed raw result is the engine's own
// failure (the run left no result), not an agent's reported failure: only
// those may be a limit or the budget.
func engineFailure(raw map[string]any) bool {
	if raw == nil {
		return false
	}
	if st, _ := raw["status"].(string); st != doc.ResultFailed {
		return false
	}
	switch reason, _ := raw["error_reason"].(string); reason {
	case doc.ReasonEngineError, doc.ReasonNoResult:
		return true
	}
	return false
}

// applyMoney rewrites an engine failure as BudgetExceeded (claude's
// error_max_budget_usd) or UsageLimited (claude's or codex's own output
// named a usage or rate limit, read from the parser's signals and the
// stderr tail; a command engine's output is never classified). It reports
// whether it changed raw.
func applyMoney(raw map[string]any, eng string, po *engine.Outcome, stderrTail string, now time.Time, fallback time.Duration) bool {
	if !engineFailure(raw) || po == nil {
		return false
	}
	if po.Subtype == "error_max_budget_usd" {
		msg := "the task's budget (--max-budget-usd) was reached; " + firstString(raw["error"], "")
		raw["error_reason"] = doc.ReasonBudgetExceeded
		raw["error"] = redactBound(msg)
		raw["summary"] = raw["error"]
		raw["terminal"] = true
		return true
	}
	if eng != config.EngineClaude && eng != config.EngineCodex {
		// A command engine's stdout and stderr are the agent's own (and its
		// tools'): a "Quota exceeded" there is no engine's limit, and taking
		// it as one would pause the engine for everyone and re-queue the
		// task without end. Such a run stays an EngineError.
		return false
	}
	w := engine.NewLimitWatch(eng)
	for _, s := range po.Signals {
		w.Line(s.Raw)
	}
	w.Text(stderrTail)
	lim, ok := w.Limit(now, fallback)
	if !ok {
		return false
	}
	msg := "usage limit: " + lim.Reason
	if !lim.Parsed {
		msg += " (no reset time given: paused for the fallback)"
	}
	raw["error_reason"] = doc.ReasonUsageLimited
	raw["resets_at"] = doc.FormatTime(lim.ResetsAt)
	raw["error"] = redactBound(msg)
	raw["summary"] = raw["error"]
	delete(raw, "terminal")
	return true
}

// codexCost prices a codex run's tokens with runtime.codex.pricing (codex
// reports no cost); nil when unpriced or not codex.
func codexCost(sys *config.System, eng string, u *doc.Usage) *float64 {
	if eng != config.EngineCodex || u == nil || sys == nil || sys.Runtime.Codex.Pricing == nil {
		return nil
	}
	p := sys.Runtime.Codex.Pricing
	c := (float64(u.InputTokens+u.CacheCreationInputTokens)*p.InputPerMTok +
		float64(u.CacheReadInputTokens)*p.CachedInputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
	c = math.Round(c*1e8) / 1e8
	return &c
}

// DefaultRateLimitBackoff is the wait before each re-run of an engine that
// ended on a server rate limit (SPEC §12.4; RunOptions.RateLimitBackoff):
// the attempt's timeout, enforced by the general, still bounds the whole;
// past the last, the attempt fails as a retryable EngineError.
func DefaultRateLimitBackoff() []time.Duration {
	return []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
}

// rateLimited reports whether a failed run ended on a server rate limit
// (not a usage limit: applyMoney made those UsageLimited), with the
// engine's words.
func rateLimited(raw map[string]any, eng string, po *engine.Outcome, stderrTail string) (string, bool) {
	if !engineFailure(raw) || po == nil || (eng != config.EngineClaude && eng != config.EngineCodex) {
		return "", false
	}
	w := engine.NewLimitWatch(eng)
	for _, s := range po.Signals {
		w.Line(s.Raw)
	}
	w.Text(stderrTail)
	return w.RateLimit()
}

// resumable is the session a re-run continues: claude's when its
// transcript was written, codex's thread when one was started; "" for a
// fresh run.
func resumable(eng string, env []string, workdir, session string) string {
	if session == "" || engine.CheckSessionID(eng, session) != nil {
		return ""
	}
	if eng == config.EngineClaude {
		p := filepath.Join(engine.ClaudeProjectDir(engine.ClaudeConfigDir(env), workdir), session+".jsonl")
		if _, err := os.Stat(p); err != nil {
			return ""
		}
	}
	return session
}

// continuePrompt writes the prompt of a re-run that resumes the session a
// rate limit interrupted.
func continuePrompt(l layout.Layout, task string) (string, error) {
	p := l.ResultSpent(task) + ".continue.md"
	return p, atomicfile.WriteFile(p, []byte(continueText), 0o600)
}

const continueText = "The model API rate-limited the previous turn. Continue the task where you left off, and end with the result as instructed.\n"

// carried adds the spend of a rate-limited attempt's earlier runs to its
// re-run's parser, so the spent record and the result count the attempt
// whole.
type carried struct {
	engine.Parser
	usage *doc.Usage
	cost  *float64
}

// wrap returns p carrying c's spend (p itself when c is nil).
func (c *carried) wrap(p engine.Parser) engine.Parser {
	if c == nil || (c.usage == nil && c.cost == nil) {
		return p
	}
	return &carried{Parser: p, usage: c.usage, cost: c.cost}
}

func (c *carried) Outcome() *engine.Outcome {
	o := c.Parser.Outcome()
	if c.usage != nil {
		o.Usage = c.usage.Add(o.Usage)
	}
	if c.cost != nil {
		sum := *c.cost
		if o.CostUSD != nil {
			sum += *o.CostUSD
		}
		o.CostUSD = &sum
	}
	return o
}
