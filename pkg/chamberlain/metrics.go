package chamberlain

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
)

// Sample is one reading of the host's resources.
type Sample struct {
	CPU    float64    // percent busy over the sampling window
	Memory float64    // percent used ((total - available) / total)
	Disk   float64    // percent used of the base dir's filesystem (as df)
	Load   [3]float64 // 1, 5, 15 minute load averages
}

// Metrics reads the host's resources. Tests feed fixed samples.
type Metrics interface {
	Sample(ctx context.Context) (Sample, error)
}

// SystemMetrics reads /proc through gopsutil. CPU is measured between two
// cpu.Times readings it keeps itself (not gopsutil's hidden per-process
// baseline): from the previous call to this one, or over Window on the
// first call.
type SystemMetrics struct {
	Path   string        // a path on the filesystem whose usage is reported
	Window time.Duration // first-call sampling window (1 s from NewSystemMetrics)

	mu   sync.Mutex
	prev *cpu.TimesStat
}

// NewSystemMetrics returns host metrics for the filesystem holding path.
func NewSystemMetrics(path string) *SystemMetrics {
	return &SystemMetrics{Path: path, Window: time.Second}
}

func cpuTimes(ctx context.Context) (cpu.TimesStat, error) {
	ts, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return cpu.TimesStat{}, fmt.Errorf("read cpu times: %w", err)
	}
	if len(ts) == 0 {
		return cpu.TimesStat{}, fmt.Errorf("read cpu times: no data")
	}
	return ts[0], nil
}

// busyPercent is busy/total between two readings; busy excludes idle and
// iowait, as top and gopsutil count it.
func busyPercent(a, b cpu.TimesStat) float64 {
	dt := total(b) - total(a)
	if dt <= 0 {
		return 0
	}
	didle := (b.Idle + b.Iowait) - (a.Idle + a.Iowait)
	p := (dt - didle) / dt * 100
	switch {
	case p < 0:
		return 0
	case p > 100:
		return 100
	}
	return p
}

// Sample reads every metric.
func (m *SystemMetrics) Sample(ctx context.Context) (Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Sample
	now, err := cpuTimes(ctx)
	if err != nil {
		return s, err
	}
	if m.prev == nil || total(now)-total(*m.prev) < 0.5 {
		// No baseline yet (or under ~50 ticks of 10 ms since it): measure a
		// window now so the figure means something.
		base := now
		t := time.NewTimer(m.Window)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, ctx.Err()
		case <-t.C:
		}
		if now, err = cpuTimes(ctx); err != nil {
			return s, err
		}
		m.prev = &base
	}
	s.CPU = busyPercent(*m.prev, now)
	m.prev = &now
	return m.rest(ctx, s)
}

// rest reads memory, disk and load into s (cheap: no window).
func (m *SystemMetrics) rest(ctx context.Context, s Sample) (Sample, error) {
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return s, fmt.Errorf("read memory: %w", err)
	}
	s.Memory = vm.UsedPercent
	du, err := disk.UsageWithContext(ctx, m.Path)
	if err != nil {
		return s, fmt.Errorf("read disk usage of %s: %w", m.Path, err)
	}
	s.Disk = du.UsedPercent
	la, err := load.AvgWithContext(ctx)
	if err != nil {
		return s, fmt.Errorf("read load average: %w", err)
	}
	s.Load = [3]float64{la.Load1, la.Load5, la.Load15}
	return s, nil
}

func total(t cpu.TimesStat) float64 {
	return t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal
}
