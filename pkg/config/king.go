package config

import (
	"os"
	"reflect"
	"time"
)

// King is king.yaml: routing, admission, retries, petitions, schedules,
// budgets and brakes.
type King struct {
	Slack       KingSlack       `yaml:"slack"`
	Retry       KingRetry       `yaml:"retry"`
	Concurrency KingConcurrency `yaml:"concurrency"`
	Petition    Petition        `yaml:"petition"`
	Schedules   KingSchedules   `yaml:"schedules"`
	Intervals   KingIntervals   `yaml:"intervals"`
	Budget      KingBudget      `yaml:"budget"`
	Breaker     KingBreaker     `yaml:"breaker"`
}

// KingBreaker is the brakes (SPEC §12.4): no attempt, item or general
// burns money in a loop. NoProgressMinutes and the burn caps are the
// generals' (they watch their soldiers); the item cap and the parks of a
// general whose failures look alike are the king's. A cap of 0 (the item
// cap, the failure threshold) and a null burn cap are off.
type KingBreaker struct {
	// NoProgressMinutes kills an attempt that produced no engine event
	// and no worktree change for this long (Stalled, retried once).
	NoProgressMinutes int `yaml:"no_progress_minutes" check:"min=1,max=1440"`
	// BurnUSD and BurnTokens kill an attempt whose cost or tokens since
	// its last progress pass them (Runaway, terminal); null: no cap.
	BurnUSD    *float64 `yaml:"burn_usd" check:"min=0.01,max=100000"`
	BurnTokens *int64   `yaml:"burn_tokens" check:"min=1000,max=1000000000000"`
	// MaxAttemptsPerItem attempts (retries and re-triggers included) of
	// one source item within ItemWindowHours; past it the item's new
	// events are parked.
	MaxAttemptsPerItem int `yaml:"max_attempts_per_item" check:"min=0,max=1000"`
	ItemWindowHours    int `yaml:"item_window_hours" check:"min=1,max=720"`
	// FailureThreshold failures of one general with one fingerprint
	// within an hour park it; ParkMinutes later one canary task runs.
	FailureThreshold int `yaml:"failure_threshold" check:"min=0,max=1000"`
	ParkMinutes      int `yaml:"park_minutes" check:"min=1,max=10080"`
}

// KingBudget limits spending (SPEC §10.7); a null (absent) key means no
// limit. Dollars are the engines' own figures (claude's total_cost_usd,
// codex's tokens × runtime.codex.pricing); tokens count every token the
// model processed, which is what a subscription plan's quota tracks.
type KingBudget struct {
	DailyUSD    *float64 `yaml:"daily_usd" check:"min=0,max=1000000"`          // a day's spend (host local day)
	TaskUSD     *float64 `yaml:"task_usd" check:"min=0,max=1000000"`           // one task's budget; a manifest's budget_usd overrides it
	DailyTokens *int64   `yaml:"daily_tokens" check:"min=0,max=1000000000000"` // a day's tokens
}

// KingSlack holds the channel for messages not tied to a thread.
type KingSlack struct {
	DefaultChannel string `yaml:"default_channel"` // env SLACK_DEFAULT_CHANNEL overrides
}

// KingRetry: a retryable failure is re-queued while retry_count <
// MaxAttempts, after BackoffSeconds·2^retry_count (capped).
type KingRetry struct {
	MaxAttempts       int `yaml:"max_attempts" check:"min=0,max=100"`
	BackoffSeconds    int `yaml:"backoff_seconds" check:"min=0,max=86400"`
	MaxBackoffSeconds int `yaml:"max_backoff_seconds" check:"min=0,max=86400"`
}

// KingConcurrency is the admission limit on soldiers in flight.
type KingConcurrency struct {
	MaxSoldiers int `yaml:"max_soldiers" check:"min=1,max=1000"`
	// HostMaxSoldiers caps the soldiers running on this host, whatever
	// the cluster-wide max_soldiers allows (SPEC §11.7); each host sets its
	// own. 0 means no cap of its own. The generals enforce it: none claims
	// while the host's registry already holds that many soldiers.
	HostMaxSoldiers int `yaml:"host_max_soldiers" check:"min=0,max=1000"`
}

// Petition configures the classifier for Slack DMs and mentions.
type Petition struct {
	Enabled bool `yaml:"enabled"`
	// Model is the older single model key; it applies to claude only, and
	// only when Models names no claude model.
	Model string `yaml:"model"`
	// Models is the classifier's model per engine ("" = the CLI's default).
	Models         map[string]string `yaml:"models"`
	TimeoutSeconds int               `yaml:"timeout_seconds" check:"min=1,max=3600"`
}

// ModelFor is the classifier's model for engine (SPEC §10.9): a claude
// model name never reaches codex.
func (p Petition) ModelFor(engine string) string {
	if m, ok := p.Models[engine]; ok {
		return m
	}
	if engine == EngineClaude {
		return p.Model
	}
	return ""
}

// KingSchedules configures manifest schedules.
type KingSchedules struct {
	CatchUpHours int `yaml:"catch_up_hours" check:"min=0,max=720"` // a run missed within this window fires once
}

// KingIntervals are the fallback polling periods; inotify wakes the king sooner.
type KingIntervals struct {
	EventsSeconds  int `yaml:"events_seconds" check:"min=1,max=3600"`
	ResultsSeconds int `yaml:"results_seconds" check:"min=1,max=3600"`
}

// DefaultKing returns king.yaml's defaults.
func DefaultKing() *King {
	return &King{
		Retry:       KingRetry{MaxAttempts: 2, BackoffSeconds: 60, MaxBackoffSeconds: 3600},
		Concurrency: KingConcurrency{MaxSoldiers: 3},
		Petition:    Petition{Enabled: true, Models: map[string]string{EngineClaude: "haiku", EngineCodex: ""}, TimeoutSeconds: 15},
		Schedules:   KingSchedules{CatchUpHours: 24},
		Intervals:   KingIntervals{EventsSeconds: 10, ResultsSeconds: 10},
		Breaker: KingBreaker{NoProgressMinutes: 20, MaxAttemptsPerItem: 8, ItemWindowHours: 24,
			FailureThreshold: 5, ParkMinutes: 60},
	}
}

// LoadKing loads king.yaml; a missing file means defaults.
func LoadKing(path string) (*King, error) {
	c := DefaultKing()
	if _, err := loadRole(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks every key of k.
func (k *King) Validate() error {
	var p problems
	checkRules(reflect.ValueOf(k), "", &p)
	if r := k.Retry; r.MaxBackoffSeconds < r.BackoffSeconds {
		p.add("retry.max_backoff_seconds", "expected at least retry.backoff_seconds (%d), got %d", r.BackoffSeconds, r.MaxBackoffSeconds)
	}
	return p.err()
}

// DefaultChannel is env SLACK_DEFAULT_CHANNEL, else slack.default_channel.
func (k *King) DefaultChannel() string {
	if v := os.Getenv(EnvDefaultChannel); v != "" {
		return v
	}
	return k.Slack.DefaultChannel
}

// RetryBackoff is the base delay before a retry.
func (k *King) RetryBackoff() time.Duration { return seconds(k.Retry.BackoffSeconds) }

// MaxRetryBackoff caps the exponential retry delay.
func (k *King) MaxRetryBackoff() time.Duration { return seconds(k.Retry.MaxBackoffSeconds) }

// PetitionTimeout bounds one petition classification.
func (k *King) PetitionTimeout() time.Duration { return seconds(k.Petition.TimeoutSeconds) }

// CatchUpWindow is how far back a missed schedule run still fires.
func (k *King) CatchUpWindow() time.Duration {
	return hours(k.Schedules.CatchUpHours)
}

// EventsInterval is the fallback period for scanning pending events.
func (k *King) EventsInterval() time.Duration { return seconds(k.Intervals.EventsSeconds) }

// ResultsInterval is the fallback period for scanning results.
func (k *King) ResultsInterval() time.Duration { return seconds(k.Intervals.ResultsSeconds) }

// NoProgressLimit is how long an attempt may show no progress.
func (k *King) NoProgressLimit() time.Duration {
	return minutes(k.Breaker.NoProgressMinutes)
}

// ItemWindow is the window the per-item attempt cap counts in.
func (k *King) ItemWindow() time.Duration { return hours(k.Breaker.ItemWindowHours) }

// ParkDuration is how long a parked general waits for its canary.
func (k *King) ParkDuration() time.Duration {
	return minutes(k.Breaker.ParkMinutes)
}
