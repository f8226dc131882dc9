package chamberlain

import (
	"math"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/health"
)

// Health levels (seed 000 "Health 판단 기준"), as pkg/health defines them.
const (
	Green  = health.Green
	Yellow = health.Yellow
	Orange = health.Orange
	Red    = health.Red
)

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

// Evaluate returns the health of a sample and the reason (pkg/health's
// shared evaluation: strict >, the worse of CPU and memory wins).
func Evaluate(s Sample, t config.Thresholds) (level, reason string) {
	return health.Evaluate(s.CPU, s.Memory, health.Thresholds{ // chamberlain.yaml's thresholds as pkg/health's
		CPUYellow: t.CPUYellow, CPUOrange: t.CPUOrange, CPURed: t.CPURed,
		MemYellow: t.MemoryYellow, MemOrange: t.MemoryOrange, MemRed: t.MemoryRed,
		DiskWarning: t.DiskWarning,
	})
}

// round1 rounds a percentage to one decimal, as the seed's resources.json.
func round1(f float64) float64 { return math.Round(f*10) / 10 }

// round2 rounds a dollar amount to cents.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
