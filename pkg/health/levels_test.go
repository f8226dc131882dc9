package health_test

import (
	"fmt"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/health"
)

func TestEvaluate_ThresholdEdgesAreStrict(t *testing.T) {
	th := seedThresholds
	edges := []struct {
		v    float64
		want string
	}{
		{0, health.Green},
		{59.9, health.Green}, {60, health.Green}, {60.1, health.Yellow},
		{79.9, health.Yellow}, {80, health.Yellow}, {80.1, health.Orange},
		{89.9, health.Orange}, {90, health.Orange}, {90.1, health.Red},
		{100, health.Red},
	}
	for _, e := range edges {
		t.Run(fmt.Sprintf("cpu=%v", e.v), func(t *testing.T) {
			if got, reason := health.Evaluate(e.v, 0, th); got != e.want {
				t.Errorf("Evaluate(cpu %v, mem 0) = %s (%s), want %s", e.v, got, reason, e.want)
			}
		})
		t.Run(fmt.Sprintf("memory=%v", e.v), func(t *testing.T) {
			if got, reason := health.Evaluate(0, e.v, th); got != e.want {
				t.Errorf("Evaluate(cpu 0, mem %v) = %s (%s), want %s", e.v, got, reason, e.want)
			}
		})
	}
}

func TestEvaluate_WorseMetricWinsAndReasonNamesIt(t *testing.T) {
	th := seedThresholds
	for _, c := range []struct {
		cpu, mem    float64
		level, text string
	}{
		{45.2, 30, health.Green, "cpu 45.2%, memory 30.0% within limits"},
		{60, 60, health.Green, "cpu 60.0%, memory 60.0% within limits"},
		{85, 10, health.Orange, "cpu 85.0% > 80%"},
		{70, 85, health.Orange, "memory 85.0% > 80%"},
		{95, 72, health.Red, "cpu 95.0% > 90%"},
		{65, 61.5, health.Yellow, "cpu 65.0% > 60%, memory 61.5% > 60%"},
		{80.04, 0, health.Orange, "cpu 80.04% > 80%"},
		{59.96, 0, health.Green, "cpu 59.96%, memory 0.0% within limits"},
	} {
		level, reason := health.Evaluate(c.cpu, c.mem, th)
		if level != c.level || reason != c.text {
			t.Errorf("Evaluate(%v, %v) = %s, %q; want %s, %q", c.cpu, c.mem, level, reason, c.level, c.text)
		}
	}
}

func TestEvaluate_CustomThresholds(t *testing.T) {
	th := health.Thresholds{CPUYellow: 50, CPUOrange: 70, CPURed: 95, MemYellow: 40, MemOrange: 60, MemRed: 70}
	if got, _ := health.Evaluate(71, 0, th); got != health.Orange {
		t.Errorf("cpu 71 with orange 70: got %s", got)
	}
	if got, _ := health.Evaluate(0, 70.5, th); got != health.Red {
		t.Errorf("memory 70.5 with red 70: got %s", got)
	}
}

func TestRankAndWorse(t *testing.T) {
	for level, want := range map[string]int{"green": 0, "yellow": 1, "orange": 2, "red": 3, "": 2, "purple": 2} {
		if got := health.Rank(level); got != want {
			t.Errorf("Rank(%q) = %d, want %d", level, got, want)
		}
	}
	for _, c := range []struct{ a, b, want string }{
		{"green", "yellow", "yellow"}, {"red", "orange", "red"}, {"green", "green", "green"},
		{"yellow", "purple", "orange"}, {"purple", "green", "orange"}, {"red", "", "red"},
	} {
		if got := health.Worse(c.a, c.b); got != c.want {
			t.Errorf("Worse(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestEvaluateTokens_SeedBoundaries(t *testing.T) {
	// Seed 000: budget 300, warning at ≥ 70 %, critical at ≥ 90 %.
	for _, c := range []struct {
		cost float64
		want string
	}{
		{0, health.TokenOK}, {209.99, health.TokenOK}, {210, health.TokenWarning},
		{269.99, health.TokenWarning}, {270, health.TokenCritical}, {1000, health.TokenCritical},
	} {
		if got := health.EvaluateTokens(c.cost, 300, 70, 90); got != c.want {
			t.Errorf("EvaluateTokens(%v) = %s, want %s", c.cost, got, c.want)
		}
	}
	if got := health.EvaluateTokens(5, 0, 70, 90); got != health.TokenUnknown {
		t.Errorf("no budget: got %s, want unknown", got)
	}
}

// seedThresholds are seed 000's defaults (chamberlain.yaml's): 60/80/90.
var seedThresholds = health.Thresholds{CPUYellow: 60, CPUOrange: 80, CPURed: 90, MemYellow: 60, MemOrange: 80, MemRed: 90}
