package config

import (
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// File names inside the configuration directory ($BASE_DIR/config).
const (
	SystemFile      = "system.yaml"
	SentinelFile    = "sentinel.yaml"
	KingFile        = "king.yaml"
	EnvoyFile       = "envoy.yaml"
	ChamberlainFile = "chamberlain.yaml"
	EnvFile         = "kingdom.env"
	GeneralsDir     = "generals"  // manifests: generals/<name>.yaml
	TemplatesDir    = "templates" // generals/templates/<name>.md, skipped by LoadManifests
)

// EnvDefaultChannel overrides slack.default_channel of king.yaml and envoy.yaml.
const EnvDefaultChannel = "SLACK_DEFAULT_CHANNEL"

// ExpandHome replaces a leading "~" or "~/" in path with the user's home
// directory. Other paths, and every path when the home directory is unknown,
// are returned unchanged.
func ExpandHome(path string) string {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return path
	}
	return filepath.Join(home, path[1:])
}

// Days converts a retention period in days to a duration.
func Days(n int) time.Duration { return scale(n, 24*time.Hour) }

func seconds(n int) time.Duration { return scale(n, time.Second) }
func minutes(n int) time.Duration { return scale(n, time.Minute) }
func hours(n int) time.Duration   { return scale(n, time.Hour) }

// scale is n units, saturated at the largest (smallest) Duration instead of
// wrapping: 999999 days must never become a negative or tiny duration
// (the keys' ranges stop such values earlier).
func scale(n int, unit time.Duration) time.Duration {
	switch {
	case n > 0 && int64(n) > math.MaxInt64/int64(unit):
		return math.MaxInt64
	case n < 0 && int64(n) < math.MinInt64/int64(unit):
		return math.MinInt64
	}
	return time.Duration(n) * unit
}

var (
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	repoRE      = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	eventTypeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	// a subscription is dot-separated segments, each a name or "*"
	subscribeRE = regexp.MustCompile(`^(\*|[A-Za-z0-9_-]+)(\.(\*|[A-Za-z0-9_-]+))*$`)
)

// validURL reports whether s is an absolute http(s) URL.
func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
