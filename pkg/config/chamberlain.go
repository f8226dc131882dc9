package config

import (
	"reflect"
	"strconv"
	"time"
)

// Chamberlain is chamberlain.yaml: every key of seed 000 §설정 plus the
// SPEC §5 additions.
type Chamberlain struct {
	Monitoring     Monitoring     `yaml:"monitoring"`
	Heartbeat      Heartbeat      `yaml:"heartbeat"`
	Thresholds     Thresholds     `yaml:"thresholds"`
	Anomaly        Anomaly        `yaml:"anomaly"`
	AutoRecovery   AutoRecovery   `yaml:"auto_recovery"`
	Retention      Retention      `yaml:"retention"`
	EventsRotation DailyHour      `yaml:"events_rotation"`
	TokenLimits    TokenLimits    `yaml:"token_limits"`
	Pricing        Pricing        `yaml:"pricing"`
	Alerts         Alerts         `yaml:"alerts"`
	Report         DailyHour      `yaml:"report"`
	Cleanup        DailyHour      `yaml:"cleanup"`
	Sessions       SessionsConfig `yaml:"sessions"`
	HTTP           HTTP           `yaml:"http"`
}

// Monitoring sets the chamberlain's tick.
type Monitoring struct {
	IntervalSeconds int `yaml:"interval_seconds" check:"min=1,max=86400"`
}

// Heartbeat: a role whose heartbeat is older than the threshold is dead.
type Heartbeat struct {
	ThresholdSeconds int `yaml:"threshold_seconds" check:"min=1,max=86400"`
}

// Thresholds are percentages; a metric strictly above a level reaches it.
type Thresholds struct {
	CPUYellow    float64 `yaml:"cpu_yellow" check:"pct"`
	CPUOrange    float64 `yaml:"cpu_orange" check:"pct"`
	CPURed       float64 `yaml:"cpu_red" check:"pct"`
	MemoryYellow float64 `yaml:"memory_yellow" check:"pct"`
	MemoryOrange float64 `yaml:"memory_orange" check:"pct"`
	MemoryRed    float64 `yaml:"memory_red" check:"pct"`
	DiskWarning  float64 `yaml:"disk_warning" check:"pct"`
	// DiskMinFreeGB: below this much free space on the base dir's
	// filesystem the king admits no new task.
	DiskMinFreeGB float64 `yaml:"disk_min_free_gb" check:"min=0,max=100000"`
}

// Anomaly sets the detectors' limits.
type Anomaly struct {
	ConsecutiveFailures int `yaml:"consecutive_failures" check:"min=1,max=1000"` // per general, reset by a success
	TimeoutSpike        int `yaml:"timeout_spike" check:"min=1,max=10000"`       // timeouts within one hour
	EventStaleMinutes   int `yaml:"event_stale_minutes" check:"min=1,max=10080"` // detected but not dispatched
}

// AutoRecovery chooses which dead roles are restarted rather than alerted.
type AutoRecovery struct {
	RestartSentinel bool `yaml:"restart_sentinel"`
	RestartOthers   bool `yaml:"restart_others"`
}

// Retention sets how long each kind of file is kept.
type Retention struct {
	LogMaxMB              int `yaml:"log_max_mb" check:"min=1,max=102400"`
	LogsDays              int `yaml:"logs_days" check:"min=1,max=3650"`
	ResultsDays           int `yaml:"results_days" check:"min=1,max=3650"`
	QueueDays             int `yaml:"queue_days" check:"min=1,max=3650"`
	PromptsDays           int `yaml:"prompts_days" check:"min=1,max=3650"`
	SessionLogsDays       int `yaml:"session_logs_days" check:"min=1,max=3650"`
	SeenDays              int `yaml:"seen_days" check:"min=1,max=3650"`
	FailedDays            int `yaml:"failed_days" check:"min=1,max=3650"`
	RejectedDays          int `yaml:"rejected_days" check:"min=1,max=3650"`
	PetitionDays          int `yaml:"petition_days" check:"min=1,max=3650"`
	AwaitedDays           int `yaml:"awaited_days" check:"min=1,max=3650"`
	TaskDirsDays          int `yaml:"task_dirs_days" check:"min=1,max=3650"`
	CloneDays             int `yaml:"clone_days" check:"min=1,max=3650"` // base clones unused this long
	ThreadMappingWarnDays int `yaml:"thread_mapping_warn_days" check:"min=1,max=3650"`
}

// LogMaxBytes is log_max_mb in bytes.
func (r Retention) LogMaxBytes() int64 { return int64(r.LogMaxMB) << 20 }

// DailyHour is the local hour (0-23) at or after which a daily job runs.
type DailyHour struct {
	Hour int `yaml:"hour" check:"hour"`
}

// TokenLimits sets the daily token budget.
type TokenLimits struct {
	Enabled                   bool    `yaml:"enabled"`
	DailyBudgetUSD            float64 `yaml:"daily_budget_usd" check:"min=0,max=1000000"`
	WarningPct                float64 `yaml:"warning_pct" check:"pct"`
	CriticalPct               float64 `yaml:"critical_pct" check:"pct"`
	MonitoringIntervalSeconds int     `yaml:"monitoring_interval_seconds" check:"min=1,max=86400"`
	StatsPath                 string  `yaml:"stats_path" check:"nonempty"` // "~/" is the home directory
}

// Pricing is USD per million tokens.
type Pricing struct {
	InputPerMTok     float64 `yaml:"input_per_mtok" check:"min=0,max=10000"`
	OutputPerMTok    float64 `yaml:"output_per_mtok" check:"min=0,max=10000"`
	CacheReadPerMTok float64 `yaml:"cache_read_per_mtok" check:"min=0,max=10000"`
}

// Alerts limits repeats of an alert while its condition lasts.
type Alerts struct {
	RepeatMinutes int `yaml:"repeat_minutes" check:"min=1,max=10080"`
}

// SessionsConfig configures session reconciliation.
type SessionsConfig struct {
	OrphanGraceMinutes int `yaml:"orphan_grace_minutes" check:"min=0,max=10080"`
}

// DefaultChamberlain returns chamberlain.yaml's defaults.
func DefaultChamberlain() *Chamberlain {
	return &Chamberlain{
		Monitoring: Monitoring{IntervalSeconds: 30},
		Heartbeat:  Heartbeat{ThresholdSeconds: 120},
		Thresholds: Thresholds{
			CPUYellow: 60, CPUOrange: 80, CPURed: 90,
			MemoryYellow: 60, MemoryOrange: 80, MemoryRed: 90,
			DiskWarning: 85, DiskMinFreeGB: 2,
		},
		Anomaly:      Anomaly{ConsecutiveFailures: 3, TimeoutSpike: 5, EventStaleMinutes: 30},
		AutoRecovery: AutoRecovery{RestartSentinel: true, RestartOthers: false},
		Retention: Retention{
			LogMaxMB: 100, LogsDays: 7, ResultsDays: 7, QueueDays: 7, PromptsDays: 3,
			SessionLogsDays: 7, SeenDays: 30, FailedDays: 7, RejectedDays: 7,
			PetitionDays: 7, AwaitedDays: 7, TaskDirsDays: 7, ThreadMappingWarnDays: 7, CloneDays: 14,
		},
		EventsRotation: DailyHour{Hour: 0},
		TokenLimits: TokenLimits{
			Enabled: true, DailyBudgetUSD: 300, WarningPct: 70, CriticalPct: 90,
			MonitoringIntervalSeconds: 60, StatsPath: "~/.claude/stats-cache.json",
		},
		Pricing:  Pricing{InputPerMTok: 15, OutputPerMTok: 75, CacheReadPerMTok: 1.5},
		Alerts:   Alerts{RepeatMinutes: 30},
		Report:   DailyHour{Hour: 18},
		Cleanup:  DailyHour{Hour: 3},
		Sessions: SessionsConfig{OrphanGraceMinutes: 10},
		HTTP:     DefaultHTTP(),
	}
}

// LoadChamberlain loads chamberlain.yaml; a missing file means defaults.
func LoadChamberlain(path string) (*Chamberlain, error) {
	c := DefaultChamberlain()
	if _, err := loadRole(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks every key of c.
func (c *Chamberlain) Validate() error {
	var p problems
	checkRules(reflect.ValueOf(c), "", &p)
	t := c.Thresholds
	ascending(&p, "thresholds", []string{"cpu_yellow", "cpu_orange", "cpu_red"}, []float64{t.CPUYellow, t.CPUOrange, t.CPURed})
	ascending(&p, "thresholds", []string{"memory_yellow", "memory_orange", "memory_red"}, []float64{t.MemoryYellow, t.MemoryOrange, t.MemoryRed})
	ascending(&p, "token_limits", []string{"warning_pct", "critical_pct"}, []float64{c.TokenLimits.WarningPct, c.TokenLimits.CriticalPct})
	validateHTTP(c.HTTP, &p)
	if c.TokenLimits.Enabled && c.TokenLimits.DailyBudgetUSD <= 0 {
		p.add("token_limits.daily_budget_usd", "expected a positive number when token_limits.enabled is true, got %s", fmtFloat(c.TokenLimits.DailyBudgetUSD))
	}
	return p.err()
}

// ascending requires vals not to decrease (yellow ≤ orange ≤ red). Equal
// levels are allowed: since a metric must be strictly above a level to reach
// it, cpu_yellow = cpu_orange = cpu_red = 100 turns CPU gating off (a busy
// build machine, a test kingdom).
func ascending(p *problems, section string, names []string, vals []float64) {
	for i := 1; i < len(vals); i++ {
		if vals[i] < vals[i-1] {
			p.add(section+"."+names[i], "expected at least %s (%s), got %s", names[i-1], fmtFloat(vals[i-1]), fmtFloat(vals[i]))
		}
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// MonitoringInterval is the chamberlain's tick.
func (c *Chamberlain) MonitoringInterval() time.Duration {
	return seconds(c.Monitoring.IntervalSeconds)
}

// HeartbeatThreshold is the age after which a role's heartbeat means dead.
func (c *Chamberlain) HeartbeatThreshold() time.Duration {
	return seconds(c.Heartbeat.ThresholdSeconds)
}

// EventStale is how long a detected event may wait undispatched.
func (c *Chamberlain) EventStale() time.Duration { return minutes(c.Anomaly.EventStaleMinutes) }

// AlertRepeat is the minimum gap between repeats of one alert.
func (c *Chamberlain) AlertRepeat() time.Duration { return minutes(c.Alerts.RepeatMinutes) }

// OrphanGrace is the age below which an unregistered soldier session is
// left alone.
func (c *Chamberlain) OrphanGrace() time.Duration { return minutes(c.Sessions.OrphanGraceMinutes) }

// TokenMonitoringInterval is how often the token budget is re-evaluated.
func (c *Chamberlain) TokenMonitoringInterval() time.Duration {
	return seconds(c.TokenLimits.MonitoringIntervalSeconds)
}

// StatsPath is token_limits.stats_path with "~/" expanded.
func (c *Chamberlain) StatsPath() string { return ExpandHome(c.TokenLimits.StatsPath) }
