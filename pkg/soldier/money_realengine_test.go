package soldier

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The real claude, told by the provider that the usage limit is reached,
// gives UsageLimited with the reset its words name (SPEC §10.8).
func TestRealClaude_UsageLimitIsUsageLimitedAtTheNamedReset(t *testing.T) {
	r := newRealRig(t, "claude")
	// A whole hour three hours ahead, in claude's words ("8pm"): named to
	// the minute, so the reset is the end of that minute.
	berlin, _ := time.LoadLocation("Europe/Berlin")
	before := time.Now()
	at := before.In(berlin).Add(3 * time.Hour).Truncate(time.Hour)
	want := at.Add(time.Minute)
	r.fake.Script("SCEN-limit", modelfake.Always(modelfake.Limit(
		`{"type":"error","error":{"type":"rate_limit_error","message":"You've hit your limit · resets `+at.Format("3pm")+` (Europe/Berlin)"}}`, nil)))
	out := r.run("task-20260101-021", "SCEN-limit review", t.TempDir(), "")
	if out.Raw["error_reason"] != doc.ReasonUsageLimited {
		t.Fatalf("raw %v, want UsageLimited", out.Raw)
	}
	if out.Raw["resets_at"] != doc.FormatTime(want) {
		t.Fatalf("resets_at %v, want %s", out.Raw["resets_at"], doc.FormatTime(want))
	}
	if e, _ := out.Raw["error"].(string); !strings.Contains(e, "hit your limit") {
		t.Fatalf("error %q does not quote the engine", e)
	}
	if n := len(r.fake.Requests("SCEN-limit")); n != 1 {
		t.Fatalf("%d requests: a usage limit must not be retried by the CLI", n)
	}
}

// --max-budget-usd is the backstop: a run the CLI stops for the task's
// budget is BudgetExceeded and terminal (SPEC §10.7).
func TestRealClaude_TaskBudgetStopsTheRunAsBudgetExceeded(t *testing.T) {
	r := newRealRig(t, "claude")
	if err := os.WriteFile(layout.New(r.base).ConfigFile("king.yaml"), []byte("budget:\n  task_usd: 0.000001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.fake.Script("SCEN-budget", modelfake.Turns(
		modelfake.Reply{ToolName: "shell", ToolInput: map[string]any{"command": "git --version"}, InputTokens: 5000, OutputTokens: 500},
		so(map[string]any{"status": "success", "summary": "should not be reached"}),
	))
	out := r.run("task-20260101-022", "SCEN-budget review", t.TempDir(), "")
	if out.Raw["error_reason"] != doc.ReasonBudgetExceeded || out.Raw["terminal"] != true {
		t.Fatalf("raw %v, want terminal BudgetExceeded", out.Raw)
	}
	if c, _ := out.Raw["cost_usd"].(float64); c <= 0 {
		t.Fatalf("cost %v: the attempt's spend must be recorded", out.Raw["cost_usd"])
	}
}

// codex's usage limit (the API's usage_limit_reached, rendered by the CLI as
// an error event and a turn.failed naming the time) gives UsageLimited.
func TestRealCodex_UsageLimitIsUsageLimited(t *testing.T) {
	r := newRealRig(t, "codex")
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Minute)
	r.fake.Script("SCEN-cxlimit", modelfake.Always(modelfake.Limit(fmt.Sprintf(
		`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":%d,"resets_in_seconds":10800}}`,
		reset.Unix()), nil)))
	out := r.run("task-20260101-023", "SCEN-cxlimit edit", t.TempDir(), "")
	// The CLI names the reset to the minute ("try again at 8:22 AM"): the
	// reset is that minute's end.
	if want := reset.Add(time.Minute); out.Raw["error_reason"] != doc.ReasonUsageLimited || out.Raw["resets_at"] != doc.FormatTime(want) {
		t.Fatalf("raw %v, want UsageLimited at %s", out.Raw, doc.FormatTime(want))
	}
	r.fake.Script("SCEN-cxquota", modelfake.Always(modelfake.Limit(
		`{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota, please check your plan and billing details."}}`, nil)))
	before := time.Now()
	out = r.run("task-20260101-024", "SCEN-cxquota edit", t.TempDir(), "")
	at, err := doc.ParseTime(fmt.Sprint(out.Raw["resets_at"]))
	if out.Raw["error_reason"] != doc.ReasonUsageLimited || err != nil || at.Before(before.Add(59*time.Minute)) {
		t.Fatalf("raw %v, want UsageLimited at now + the 60 minute fallback", out.Raw)
	}
}
