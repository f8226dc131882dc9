package chamberlain

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// previousHealth is the health last written to resources.json (green when
// unknown, as seed 000's get_current_health).
func previousHealth(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return Green
	}
	var doc struct {
		Health string `json:"health"`
	}
	if json.Unmarshal(b, &doc) != nil || doc.Health == "" {
		return Green
	}
	return doc.Health
}

// writeResources publishes resources.json (validated, write-then-rename),
// emits system.health_changed on a transition and system.resource_warning
// when a metric crosses a threshold upwards, and the token events.
func (r *Role) writeResources(rep *Report) error {
	r.tokenEvents(rep)
	if rep.Resources == nil {
		return nil
	}
	prev := previousHealth(r.l.Resources())
	if err := health.Write(r.l.Resources(), rep.Resources); err != nil {
		return err
	}
	if r.mode == ModeDaemon {
		r.appendMetrics(rep)
	}
	if prev != rep.Health {
		r.log.Info(fmt.Sprintf("health %s → %s (%s)", prev, rep.Health, rep.Reason), "cat", "HEALTH")
		r.emit("system.health_changed", map[string]any{"from": prev, "to": rep.Health, "reason": rep.Reason})
	}
	t := r.c.Thresholds
	r.crossed("cpu_percent", rep.Sample.CPU, levelOf(rep.Sample.CPU, t.CPUYellow, t.CPUOrange, t.CPURed),
		map[string]float64{Yellow: t.CPUYellow, Orange: t.CPUOrange, Red: t.CPURed})
	r.crossed("memory_percent", rep.Sample.Memory, levelOf(rep.Sample.Memory, t.MemoryYellow, t.MemoryOrange, t.MemoryRed),
		map[string]float64{Yellow: t.MemoryYellow, Orange: t.MemoryOrange, Red: t.MemoryRed})
	disk := Green
	if rep.Sample.Disk > t.DiskWarning {
		disk = Yellow
	}
	r.crossed("disk_percent", rep.Sample.Disk, disk, map[string]float64{Yellow: t.DiskWarning})
	return nil
}

// crossed remembers a metric's level and emits system.resource_warning when
// it rises past a threshold.
func (r *Role) crossed(metric string, value float64, level string, thresholds map[string]float64) {
	prev := cmp.Or(r.state.Levels[metric], Green) // none yet: green
	r.state.Levels[metric] = level
	if health.Rank(level) > health.Rank(prev) {
		r.log.Warn(fmt.Sprintf("%s %.1f over %.0f", metric, value, thresholds[level]), "cat", "RESOURCE")
		r.emit("system.resource_warning", map[string]any{"metric": metric, "value": value, "threshold": thresholds[level], "level": level})
	}
}

// tokenEvents emits system.token_budget_reset when the local date changed
// since the last evaluation and system.token_status_changed on a new status.
func (r *Role) tokenEvents(rep *Report) {
	today := spend.Date(rep.Time)
	memo := &r.state.Token
	if memo.Date != "" && memo.Date != today {
		r.emit("system.token_budget_reset", map[string]any{"date": today, "previous_cost": memo.CostUSD})
	}
	t := rep.Tokens
	first := memo.Status == ""
	if rep.TokenErr != nil && (first || memo.Status != t.Status) {
		r.log.Warn("token budget unknown", "err", rep.TokenErr)
	}
	if (!first && memo.Status != t.Status) || (first && t.Status != health.TokenOK && t.Status != health.TokenUnknown) {
		from := memo.Status
		if from == "" {
			from = health.TokenOK
		}
		r.emit("system.token_status_changed", map[string]any{"from": from, "to": t.Status, "daily_cost_usd": t.DailyCostUSD})
	}
	*memo = TokenMemo{Date: today, Status: t.Status, CostUSD: t.DailyCostUSD}
}

// appendMetrics appends one line per tick to logs/metrics.log (seed 002:
// the chamberlain's metrics log, size-rotated like the others).
func (r *Role) appendMetrics(rep *Report) {
	s := rep.Sample
	line := fmt.Sprintf("[%s] cpu=%.1f memory=%.1f disk=%.1f load=%.2f,%.2f,%.2f health=%s soldiers=%d/%d tokens=%s cost_usd=%.2f\n",
		rep.Time.In(time.Local).Format("2006-01-02 15:04:05"), s.CPU, s.Memory, s.Disk, s.Load[0], s.Load[1], s.Load[2],
		rep.Health, rep.Resources.Sessions.SoldiersActive, rep.Resources.Sessions.SoldiersMax, rep.Tokens.Status, rep.Tokens.DailyCostUSD)
	err := func() error {
		lf, err := lockfile.Open(r.l.RotateLock())
		if err != nil {
			return err
		}
		defer lf.Close()
		if err := lf.RLock(); err != nil {
			return err
		}
		f, err := os.OpenFile(r.l.MetricsLog(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		_, werr := f.Write([]byte(line))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		return werr
	}()
	if err != nil {
		r.log.Warn("append metrics.log", "err", err)
	}
}
