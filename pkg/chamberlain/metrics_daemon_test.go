package chamberlain

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
)

func TestDaemonMetrics_FreshDaemonSampleGivesCPUWithoutAWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resources.json")
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	res := &health.Resources{
		Timestamp: doc.FormatTime(t0.Add(-20 * time.Second)),
		System:    health.SystemStats{CPUPercent: 42.37, MemoryPercent: 10, DiskPercent: 10, LoadAverage: [3]float64{1, 1, 1}},
		Sessions:  health.SessionStats{List: []string{}},
		Health:    health.Green,
	}
	if err := health.Write(path, res); err != nil {
		t.Fatal(err)
	}
	// A window this long would hang the test if it were used: the fresh
	// file must make sampling unnecessary.
	sys := &SystemMetrics{Path: dir, Window: time.Hour}
	d := &DaemonMetrics{Sys: sys, ResourcesPath: path, MaxAge: time.Minute, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := d.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU != 42.37 {
		t.Errorf("cpu = %v, want the daemon's 42.37", s.CPU)
	}
	if s.Memory <= 0 || s.Disk <= 0 {
		t.Errorf("memory/disk not read now: %+v", s)
	}

	// Stale (older than MaxAge): the window is used; a cancelled context
	// proves it was entered.
	clk.Advance(5 * time.Minute)
	cancel()
	if _, err := d.Sample(ctx); err == nil {
		t.Error("a stale daemon sample was used instead of sampling")
	}
	// Missing file: samples too.
	d2 := &DaemonMetrics{Sys: &SystemMetrics{Path: dir, Window: time.Millisecond}, ResourcesPath: filepath.Join(dir, "none.json"), MaxAge: time.Minute, Clock: clk}
	s2, err := d2.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s2.CPU == 42.37 {
		t.Error("missing file gave the old figure")
	}
}
