package general

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

const (
	learnedFile   = "learned-patterns.md"
	learnedHeader = "# Learned patterns\n\n"
	maxEntryBytes = 2048
)

// appendMemory adds one line per update to learned-patterns.md and trims
// the oldest entries while the file exceeds the manifest's memory cap.
func (g *General) appendMemory(task string, updates []string) error {
	dir := g.o.Layout.MemoryGeneral(g.name)
	if err := layout.EnsureDir(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, learnedFile)
	day := g.o.Clock.Now().UTC().Format(time.DateOnly)
	return lockfile.With(filepath.Join(dir, ".learned-patterns.lock"), func() error {
		var entries []string
		if b, err := os.ReadFile(path); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "- ") {
					entries = append(entries, line)
				}
			}
		}
		for _, u := range updates {
			u = strings.Join(strings.Fields(u), " ") // one entry = one line
			if u == "" {
				continue
			}
			if len(u) > maxEntryBytes {
				u = u[:maxEntryBytes] + "…"
			}
			entries = append(entries, "- ["+day+" "+task+"] "+u)
		}
		entries = TrimOldest(entries, int(g.o.Manifest.MemoryMaxBytes())-len(learnedHeader))
		return atomicfile.WriteFile(path, []byte(learnedHeader+strings.Join(entries, "\n")+"\n"), 0o600)
	})
}

// TrimOldest drops entries from the front until the lines (newline-joined)
// fit in max bytes. The newest entry is kept even when it alone is larger.
func TrimOldest(entries []string, max int) []string {
	size := 0
	for _, e := range entries {
		size += len(e) + 1
	}
	for len(entries) > 1 && size > max {
		size -= len(entries[0]) + 1
		entries = entries[1:]
	}
	return entries
}
