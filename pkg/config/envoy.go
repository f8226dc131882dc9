package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Envoy is envoy.yaml: Slack access and the outbound loop.
type Envoy struct {
	Slack     EnvoySlack     `yaml:"slack"`
	Intervals EnvoyIntervals `yaml:"intervals"`
	Retry     EnvoyRetry     `yaml:"retry"`
	Buttons   EnvoyButtons   `yaml:"buttons"`
}

// EnvoyButtons configures the buttons on the envoy's messages (SPEC §12.5).
type EnvoyButtons struct {
	// TTLHours is how long a button can be clicked after its message was
	// posted.
	TTLHours int `yaml:"ttl_hours" check:"min=1,max=720"`
}

// EnvoySlack configures Slack. Tokens are read from the environment
// variables named here, never from YAML.
type EnvoySlack struct {
	BotTokenEnv    string   `yaml:"bot_token_env" check:"nonempty"`
	AppTokenEnv    string   `yaml:"app_token_env" check:"nonempty"`
	DefaultChannel string   `yaml:"default_channel"` // env SLACK_DEFAULT_CHANNEL overrides
	APIURL         string   `yaml:"api_url" check:"nonempty"`
	AllowedUsers   []string `yaml:"allowed_users"` // Slack user ids that may create work
	AllowAll       bool     `yaml:"allow_all"`     // everyone may create work
}

// EnvoyIntervals are the envoy's periods.
type EnvoyIntervals struct {
	OutboundSeconds        int `yaml:"outbound_seconds" check:"min=1,max=3600"`
	ConversationTTLSeconds int `yaml:"conversation_ttl_seconds" check:"min=1,max=2592000"`
}

// EnvoyRetry bounds Slack sends ("3 attempts in total", SPEC §9.28).
type EnvoyRetry struct {
	MaxAttempts int `yaml:"max_attempts" check:"min=1,max=100"`
}

// DefaultEnvoy returns envoy.yaml's defaults.
func DefaultEnvoy() *Envoy {
	return &Envoy{
		Slack: EnvoySlack{
			BotTokenEnv:  "SLACK_BOT_TOKEN",
			AppTokenEnv:  "SLACK_APP_TOKEN",
			APIURL:       "https://slack.com/api/",
			AllowedUsers: []string{},
		},
		Intervals: EnvoyIntervals{OutboundSeconds: 5, ConversationTTLSeconds: 3600},
		Retry:     EnvoyRetry{MaxAttempts: 3},
		Buttons:   EnvoyButtons{TTLHours: 24},
	}
}

// LoadEnvoy loads envoy.yaml; a missing file means defaults.
func LoadEnvoy(path string) (*Envoy, error) {
	c := DefaultEnvoy()
	if _, err := loadRole(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks every key of e.
func (e *Envoy) Validate() error {
	var p problems
	checkRules(reflect.ValueOf(e), "", &p)
	for _, k := range []struct{ key, val string }{
		{"slack.bot_token_env", e.Slack.BotTokenEnv},
		{"slack.app_token_env", e.Slack.AppTokenEnv},
	} {
		if k.val != "" && !envNameRE.MatchString(k.val) {
			p.add(k.key, "expected the name of an environment variable, got %q", k.val)
		}
	}
	// slack-go appends method names to the URL, so it must end in "/".
	if u := e.Slack.APIURL; u != "" && (!validURL(u) || !strings.HasSuffix(u, "/")) {
		p.add("slack.api_url", "expected an http(s) URL ending in /, got %q", u)
	}
	for i, u := range e.Slack.AllowedUsers {
		if strings.TrimSpace(u) == "" {
			p.add(fmt.Sprintf("slack.allowed_users[%d]", i), "expected a Slack user id, got %q", u)
		}
	}
	return p.err()
}

// DefaultChannel is env SLACK_DEFAULT_CHANNEL, else slack.default_channel.
func (e *Envoy) DefaultChannel() string {
	if v := os.Getenv(EnvDefaultChannel); v != "" {
		return v
	}
	return e.Slack.DefaultChannel
}

// Allowed reports whether a Slack user may create work.
func (e *Envoy) Allowed(userID string) bool {
	if e.Slack.AllowAll {
		return true
	}
	return userID != "" && slices.Contains(e.Slack.AllowedUsers, userID)
}

// OutboundInterval is the fallback period for the outbound queue.
func (e *Envoy) OutboundInterval() time.Duration { return seconds(e.Intervals.OutboundSeconds) }

// ButtonTTL is how long a button stays clickable.
func (e *Envoy) ButtonTTL() time.Duration { return time.Duration(e.Buttons.TTLHours) * time.Hour }

// ConversationTTL is how long a conversation thread stays tracked.
func (e *Envoy) ConversationTTL() time.Duration { return seconds(e.Intervals.ConversationTTLSeconds) }
