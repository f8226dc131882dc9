// Package retention deletes what the kingdom no longer needs (seed 002,
// SPEC §9.31): files past their age in logs/, state/ and the queues' end
// states, workspace task dirs (with the engine sessions stored for them),
// base clones no task used for retention.clone_days, and dot-temps whose
// writer died; Rows ages out the store's documents in end states. The
// event log's splits are the store's own (store.TrimEvents).
//
// The chamberlain drives it: its daily cleanup job calls
//
//	n, err := retention.New(l, tasks, cfg.Retention, log).Clean(now)
//
// (tasks: the store's task queue, which says whose task dir is still in
// use), every ten minutes it calls SweepTemps(l, now), and the host that
// leads the cluster duties calls Rows. Retention only removes; it emits no
// event and queues no message (its caller reports the count).
package retention

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// TempMaxAge is the age past which a dot-temp's writer is taken as dead.
const TempMaxAge = 10 * time.Minute

// Cleaner applies chamberlain.yaml's retention block to one installation.
type Cleaner struct {
	l     layout.Layout
	ret   config.Retention
	log   *slog.Logger
	tasks *queue.Queue
}

// New returns the cleaner of layout l; tasks is the store's task queue
// (queue.OnStore).
func New(l layout.Layout, tasks *queue.Queue, ret config.Retention, log *slog.Logger) *Cleaner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cleaner{l: l, ret: ret, log: log, tasks: tasks}
}

// SweepTemps removes dot-temps older than TempMaxAge everywhere in the
// tree (layout.TempDirs) and returns how many went: their writer died.
func SweepTemps(l layout.Layout, now time.Time) int {
	n := 0
	dirs := l.TempDirs()
	for _, d := range dirs {
		m, _ := atomicfile.SweepOldTemps(d, TempMaxAge, now)
		n += m
	}
	return n
}

// Clean deletes everything past its retention at now and returns how many
// files and directories went.
func (c *Cleaner) Clean(now time.Time) (int, error) {
	ret := c.ret
	l := c.l
	type rule struct {
		dir   string
		days  int
		match func(name string) bool
	}
	all := func(string) bool { return true }
	suffix := func(s ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range s {
				if strings.HasSuffix(n, x) {
					return true
				}
			}
			return false
		}
	}
	rules := []rule{
		{l.LogsDir(), ret.LogsDays, suffix(".old")},
		{l.LogsDir(), ret.LogsDays, func(n string) bool { return n == filepath.Base(l.EnvoyConsoleLog()) }},
		{l.SessionLogsDir(), ret.SessionLogsDays, suffix(".json", ".err", ".log")},
		{l.AnalysisDir(), ret.LogsDays, func(n string) bool { return strings.HasPrefix(n, "daily-") && strings.HasSuffix(n, ".json") }},
		{l.ResultsDir(), ret.ResultsDays, all},
		{l.PromptsDir(), ret.PromptsDays, all},
		{l.QueueState(layout.QEvents, layout.Completed), ret.QueueDays, all},
		{l.QueueState(layout.QTasks, layout.Completed), ret.QueueDays, all},
		{l.QueueState(layout.QMessages, layout.Sent), ret.QueueDays, all},
		{l.QueueState(layout.QMessages, layout.Failed), ret.FailedDays, all},
		{l.QueueState(layout.QEvents, layout.Rejected), ret.RejectedDays, all},
		{l.QueueState(layout.QTasks, layout.Rejected), ret.RejectedDays, all},
		{l.QueueState(layout.QMessages, layout.Rejected), ret.RejectedDays, all},
		{l.InboxRejected(), ret.RejectedDays, all},
		{l.PetitionResultsDir(), ret.PetitionDays, all},
		{l.PetitionPromptsDir(), ret.PetitionDays, all},
		{filepath.Join(l.EnvoyConsoleInbox(), layout.Rejected), ret.RejectedDays, all},
		{l.SeenDir(), ret.SeenDays, all},
	}
	total := 0
	var errs []error
	// Task dirs first: their engine sessions are found through the final
	// results, which the rules below may age out in the same pass.
	n, err := c.cleanTaskDirs(now.Add(-config.Days(ret.TaskDirsDays)))
	total += n
	errs = append(errs, err)
	for _, ru := range rules {
		n, err := removeOlder(ru.dir, now.Add(-config.Days(ru.days)), ru.match)
		total += n
		errs = append(errs, err)
	}
	n, err = c.cleanClones(now.Add(-config.Days(ret.CloneDays)))
	total += n
	errs = append(errs, err)
	c.warnOldEntries(now)
	return total, errors.Join(errs...)
}

// removeOlder deletes regular files in dir (not dot-files, not recursing)
// whose name matches and whose mtime is before cutoff.
func removeOlder(dir string, cutoff time.Time, match func(string) bool) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", dir, err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !match(name) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			n++
		}
	}
	return n, nil
}
