package chamberlain

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// An engine-pause.json that cannot be read says nothing about the pauses:
// no "▶️ Recovered" for an engine still paused, and no second pause alert
// once the file reads again.
func TestMoney_UnreadablePauseFileIsNoRecovery(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local)
	e := newEnv(t, now)
	r := e.role(ModeDaemon)
	good := enginepause.File{"claude": {Until: doc.FormatTime(now.Add(time.Hour)), Reason: "You've hit your limit"}}
	if err := enginepause.Save(t.Context(), kv.OnStore(e.st), good); err != nil {
		t.Fatal(err)
	}
	e.tick(r)
	if n := len(e.messagesOf(KindPause)); n != 1 {
		t.Fatalf("pause alerts = %d, want 1", n)
	}
	if err := os.WriteFile(e.l.EnginePause(), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	e.tick(r)
	if n := len(e.messagesOf(KindRecovered)); n != 0 {
		t.Fatalf("recovered notes while the pause file is unreadable = %d, want 0", n)
	}
	if err := enginepause.Save(t.Context(), kv.OnStore(e.st), good); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	e.tick(r)
	if n := len(e.messagesOf(KindPause)); n != 1 {
		t.Errorf("pause alerts after the file reads again = %d, want 1", n)
	}
}
