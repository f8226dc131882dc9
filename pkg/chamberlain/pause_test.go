package chamberlain

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Events waiting because the operator paused the kingdom are not an
// anomaly; the alert comes only once the pause is lifted and they still
// wait.
func TestEvents_NoStaleAlertWhilePaused(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	id := "evt-inbox-a-1"
	if err := e.queue(layout.QEvents).Put(layout.Pending, id, doc.Event{ID: id, Type: "x", Source: "inbox",
		Priority: "normal", CreatedAt: doc.FormatTime(e.clk.Now()), Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	e.emitAs("event.detected", "sentinel", map[string]any{"event_id": id, "source": "inbox", "event_type": "x"})
	if err := atomicfile.WriteJSON(e.l.KingPaused(), control.Pause{Since: doc.FormatTime(e.clk.Now()), By: "op"}); err != nil {
		t.Fatal(err)
	}
	r := e.role(ModeDaemon)
	e.tick(r)
	e.clk.Advance(45 * time.Minute)
	e.tick(r)
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alerted %d times about events held by a pause", n)
	}
	os.Remove(e.l.KingPaused())
	e.tick(r)
	if n := len(e.messages()); n != 1 {
		t.Fatalf("messages after the pause = %d, want the stale alert", n)
	}
}
