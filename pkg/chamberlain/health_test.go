package chamberlain

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

func TestEvaluate_ThresholdEdges(t *testing.T) {
	th := config.DefaultChamberlain().Thresholds
	cases := []struct {
		v    float64
		want string
	}{
		{0, Green}, {59.9, Green}, {60, Green}, {60.1, Yellow},
		{79.9, Yellow}, {80, Yellow}, {80.1, Orange},
		{89.9, Orange}, {90, Orange}, {90.1, Red}, {100, Red},
	}
	for _, c := range cases {
		if got, _ := Evaluate(Sample{CPU: c.v, Memory: 1}, th); got != c.want {
			t.Errorf("cpu %.1f: health %s, want %s", c.v, got, c.want)
		}
		if got, _ := Evaluate(Sample{CPU: 1, Memory: c.v}, th); got != c.want {
			t.Errorf("memory %.1f: health %s, want %s", c.v, got, c.want)
		}
	}
	// The worse of the two decides.
	if got, reason := Evaluate(Sample{CPU: 85, Memory: 95}, th); got != Red || reason != "memory 95.0% > 90%" {
		t.Errorf("cpu 85 mem 95 = %s (%s), want red by memory", got, reason)
	}
}

func TestTick_WritesResourcesAndHealthTransitions(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	e.met.set(60, 10, 10)
	e.tick(r)
	b, err := os.ReadFile(e.l.Resources())
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc.KindResources, b); err != nil {
		t.Fatalf("resources.json invalid: %v\n%s", err, b)
	}
	var res Resources
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Health != Green || res.System.CPUPercent != 60 || res.Sessions.SoldiersMax != 3 || res.Tokens == nil || res.Tokens.Status != health.TokenOK { // from the cost ledger (SPEC §10.6): nothing spent yet is ok, not unknown
		t.Fatalf("resources = %+v", res)
	}
	if n := len(e.events("system.health_changed")); n != 0 {
		t.Fatalf("health_changed at 60.0 (still green): %d events", n)
	}
	e.met.set(60.1, 10, 10)
	e.clk.Advance(30 * time.Second)
	e.tick(r)
	hc := e.events("system.health_changed")
	if len(hc) != 1 {
		t.Fatalf("health_changed events = %d, want 1", len(hc))
	}
	if d := dataOf(t, hc[0]); d["from"] != Green || d["to"] != Yellow || d["reason"] != "cpu 60.1% > 60%" {
		t.Fatalf("health_changed data = %v", d)
	}
	rw := e.events("system.resource_warning")
	if len(rw) != 1 || dataOf(t, rw[0])["metric"] != "cpu_percent" {
		t.Fatalf("resource_warning = %v", rw)
	}
	if b, err := os.ReadFile(e.l.MetricsLog()); err != nil || strings.Count(string(b), "\n") != 2 || !strings.Contains(string(b), "cpu=60.1") {
		t.Fatalf("metrics.log = %q, %v", b, err)
	}
	// Same level again: no new events.
	e.clk.Advance(30 * time.Second)
	e.tick(r)
	if len(e.events("system.health_changed")) != 1 || len(e.events("system.resource_warning")) != 1 {
		t.Fatal("a steady level emitted events again")
	}
}

func TestTick_DiskWarning(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	e.met.set(10, 10, 85)
	e.tick(r)
	if n := len(e.events("system.resource_warning")); n != 0 || len(e.messages()) != 0 {
		t.Fatalf("disk at 85.0 (threshold 85): %d warnings, %d messages", n, len(e.messages()))
	}
	e.met.set(10, 10, 85.1)
	e.clk.Advance(30 * time.Second)
	e.tick(r)
	rw := e.events("system.resource_warning")
	if len(rw) != 1 || dataOf(t, rw[0])["metric"] != "disk_percent" || dataOf(t, rw[0])["threshold"] != 85.0 {
		t.Fatalf("resource_warning = %v", rw)
	}
	ms := e.messages()
	if len(ms) != 1 || ms[0].Type != doc.MessageNotification || ms[0].Urgency != doc.UrgencyNormal || ms[0].TaskID != nil {
		t.Fatalf("disk alert = %+v", ms)
	}
	// health is not affected by disk
	if h := previousHealth(e.l.Resources()); h != Green {
		t.Fatalf("health = %s, want green", h)
	}
}

func TestAlerts_RedHourAtMostThreeMessages(t *testing.T) {
	e := newEnv(t, time.Date(2026, 11, 21, 12, 0, 0, 0, time.Local))
	r := e.role(ModeDaemon)
	e.met.set(95, 20, 10)
	for i := 0; i < 120; i++ { // one hour of red, a tick every 30 s
		if i == 70 {
			// a restart in the middle: alert state survives on disk
			r.Close()
			r = e.role(ModeDaemon)
		}
		e.tick(r)
		e.clk.Advance(30 * time.Second)
	}
	red := e.messages()
	if len(red) != 2 {
		t.Fatalf("%d messages during the red hour, want 2 (enter + one repeat at 30 min)", len(red))
	}
	for _, m := range red {
		if m.Urgency != doc.UrgencyHigh {
			t.Errorf("red alert urgency %s, want high", m.Urgency)
		}
	}
	e.met.set(20, 20, 10)
	for i := 0; i < 20; i++ {
		e.tick(r)
		e.clk.Advance(30 * time.Second)
	}
	all := e.messages()
	if len(all) != 3 {
		t.Fatalf("%d messages in total, want 3 (enter, repeat, recovered)", len(all))
	}
	var recovered int
	for _, m := range all {
		if m.Urgency == doc.UrgencyNormal && len(m.Content) > 10 && m.Content[:10] == "Recovered:" {
			recovered++
		}
	}
	if recovered != 1 {
		t.Fatalf("recovered notes = %d, want 1: %+v", recovered, all)
	}
}
