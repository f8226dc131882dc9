package chamberlain

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/health"
)

// DaemonMetrics answers chamberlain --once beside a running daemon without
// a sampling window: CPU is the daemon's last sample (its resources.json)
// when that is at most MaxAge old; memory, disk and load are read now (they
// need no window). An older, missing or unusable file falls back to Sys,
// which samples CPU over its window.
type DaemonMetrics struct {
	Sys           *SystemMetrics
	ResourcesPath string
	MaxAge        time.Duration
	Clock         clock.Clock
}

// Sample implements Metrics.
func (d *DaemonMetrics) Sample(ctx context.Context) (Sample, error) {
	snap, err := health.Read(d.ResourcesPath, d.Clock.Now())
	if err != nil || snap.Resources == nil || snap.Age > d.MaxAge || snap.Age < -d.MaxAge {
		return d.Sys.Sample(ctx)
	}
	return d.Sys.rest(ctx, Sample{CPU: snap.Resources.System.CPUPercent})
}
