package operator

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

func TestStatus_ShowsSpendAgainstBudgetAndEnginePauses(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.WriteFile(l.ConfigFile("king.yaml"), []byte("budget:\n  daily_usd: 1.00\n  task_usd: 0.10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := filesShared(t, l)
	c := 0.95
	if _, err := spend.StoreDays(sh.KV).Open(t.Context(), spend.Date(now)).Record([]string{"task-1#0#s"},
		[]spend.Entry{{Task: "task-1", General: "gen-pr", Engine: "claude", CostUSD: &c, Usage: spend.Usage{InputTokens: 7}}}); err != nil {
		t.Fatal(err)
	}
	until := now.Add(90 * time.Minute)
	if err := enginepause.Save(t.Context(), sh.KV, enginepause.File{
		"claude": {Until: doc.FormatTime(until), Reason: "limit"},
		"codex":  {Until: doc.FormatTime(now.Add(-time.Minute)), Reason: "over"},
	}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	readMoney(t.Context(), sh, now).print(&b)
	out := b.String()
	for _, want := range []string{"spend today: $0.95 of $1.00", "(95%)", "over 80%",
		"engine claude: paused by a usage limit until " + until.In(time.Local).Format("2006-01-02 15:04:05")} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "codex") {
		t.Errorf("an ended pause is shown:\n%s", out)
	}
}
