package retention

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// warnOldEntries logs seed 002's safety check: thread mappings (and awaited
// replies) older than the warning age are a sign that a task finished
// without its mapping being cleared. The envoy owns those files; retention
// only reads them.
func (c *Cleaner) warnOldEntries(now time.Time) {
	cut := now.Add(-config.Days(c.ret.ThreadMappingWarnDays))
	for _, path := range []string{c.l.EnvoyThreadMappings(), c.l.EnvoyAwaiting()} {
		b, err := queue.ReadLimited(path, queue.DefaultMaxSize*16)
		if err != nil {
			continue
		}
		var doc any
		if json.Unmarshal(b, &doc) != nil {
			continue
		}
		if n := countOld(doc, cut); n > 0 {
			c.log.Warn(fmt.Sprintf("%d entries of %s are older than %d days", n, path, c.ret.ThreadMappingWarnDays), "cat", "CLEANUP")
		}
	}
}

// countOld counts the entries (values of a top-level object, or items of a
// top-level array) carrying a timestamp field older than cut.
func countOld(doc any, cut time.Time) int {
	var entries []any
	switch d := doc.(type) {
	case map[string]any:
		for _, v := range d {
			entries = append(entries, v)
		}
	case []any:
		entries = d
	}
	n := 0
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range []string{"created_at", "registered_at", "updated_at", "at", "ts"} {
			s, ok := m[k].(string)
			if !ok {
				continue
			}
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				if t.Before(cut) {
					n++
				}
				break
			}
		}
	}
	return n
}
