package king

import (
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Below thresholds.disk_min_free_gb the king admits no
// task and alerts once; admission resumes when space comes back.
func TestKing_LowDiskHoldsAdmissionWithOneAlert(t *testing.T) {
	f := newFixture(t, genPR)
	free := uint64(1 << 30) // 1 GB
	k := f.k
	k.disk = diskHold{minFreeGB: 2, freeBytes: func(string) (uint64, error) { return free, nil }}
	f.event("evt-1", "github.issue.assigned", "high")
	f.tick()
	f.tick()
	if got := f.ids(layout.QEvents, layout.Dispatched); len(got) != 0 {
		t.Fatalf("dispatched on a low disk: %v", got)
	}
	var alerts []string
	for _, id := range f.ids(layout.QMessages, layout.Pending) {
		if strings.HasPrefix(id, "msg-king-disk-low-") {
			alerts = append(alerts, id)
		}
	}
	if len(alerts) != 1 {
		t.Fatalf("disk alerts = %v, want exactly one over two ticks", alerts)
	}
	if m := f.message(alerts[0]); !strings.Contains(m.Content, "disk_min_free_gb 2") || m.Urgency != "high" {
		t.Errorf("alert = %+v", m)
	}
	if n := len(f.internal("system.disk_low")); n != 1 {
		t.Errorf("system.disk_low = %d, want 1", n)
	}
	free = 5 << 30
	f.tick()
	eqList(t, "dispatched after space came back", f.ids(layout.QEvents, layout.Dispatched), "evt-1")
	if n := len(f.internal("system.disk_ok")); n != 1 {
		t.Errorf("system.disk_ok = %d, want 1", n)
	}
}
