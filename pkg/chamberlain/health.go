package chamberlain

import (
	"fmt"
	"math"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// Health levels (seed 000 "Health 판단 기준").
const (
	Green  = "green"
	Yellow = "yellow"
	Orange = "orange"
	Red    = "red"
)

// healthRank orders levels: green 0 … red 3 (unknown names count as green).
func healthRank(h string) int {
	switch h {
	case Yellow:
		return 1
	case Orange:
		return 2
	case Red:
		return 3
	}
	return 0
}

// levelOf returns the level a value reaches against yellow/orange/red
// thresholds. Thresholds use strict > (SPEC §9.18: 60.0 is green).
func levelOf(v, yellow, orange, red float64) string {
	switch {
	case v > red:
		return Red
	case v > orange:
		return Orange
	case v > yellow:
		return Yellow
	}
	return Green
}

// Evaluate returns the health of a sample and a short reason naming the
// metric that decided it ("cpu_percent: 72.0"); the reason is empty when green.
func Evaluate(s Sample, t config.Thresholds) (health, reason string) {
	cpu := levelOf(s.CPU, t.CPUYellow, t.CPUOrange, t.CPURed)
	mem := levelOf(s.Memory, t.MemoryYellow, t.MemoryOrange, t.MemoryRed)
	health = cpu
	if healthRank(mem) > healthRank(cpu) {
		health = mem
	}
	switch {
	case health == Green:
		return health, ""
	case healthRank(cpu) >= healthRank(mem) && healthRank(mem) > 0:
		return health, fmt.Sprintf("cpu_percent: %.1f, memory_percent: %.1f", s.CPU, s.Memory)
	case healthRank(cpu) > healthRank(mem):
		return health, fmt.Sprintf("cpu_percent: %.1f", s.CPU)
	}
	return health, fmt.Sprintf("memory_percent: %.1f", s.Memory)
}

// ExitCode maps a health level to chamberlain --once's exit code: 0 green,
// 1 yellow or orange, 2 red.
func ExitCode(health string) int {
	switch health {
	case Green:
		return 0
	case Yellow, Orange:
		return 1
	case Red:
		return 2
	}
	return 3
}

// round1 rounds a percentage to one decimal, as the seed's resources.json.
func round1(f float64) float64 { return math.Round(f*10) / 10 }

// round2 rounds a dollar amount to cents.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
