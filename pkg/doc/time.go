package doc

import (
	"fmt"
	"time"
)

// TimeLayout is how Kingdom writes timestamps: RFC 3339, UTC, whole
// seconds, 'Z' (SPEC §9.23; seed 000's `date -u +%Y-%m-%dT%H:%M:%SZ`).
const TimeLayout = "2006-01-02T15:04:05Z"

// FormatTime renders t as a Kingdom timestamp, e.g. 2026-11-21T10:00:00Z.
func FormatTime(t time.Time) string {
	return t.UTC().Format(TimeLayout)
}

// ParseTime reads any RFC 3339 timestamp (fractional seconds and offsets
// accepted, as other tools may write them) and returns it in UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time %q: %w", s, err)
	}
	return t.UTC(), nil
}
