package king

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// OrphanGrace is how long a task's general may be uninstalled (its manifest
// file gone) before the king fails the task. Without this, tasks addressed
// to a general that no longer exists would wait forever and hold slots of
// concurrency.max_soldiers, stopping all dispatch.
const OrphanGrace = 10 * time.Minute

// orphanScanEvery spaces the scans for orphaned tasks.
const orphanScanEvery = time.Minute

// processOrphans fails the pending and in-progress tasks whose general has
// been uninstalled for OrphanGrace: a ❌ notification, task.failed, task and
// event to completed/. A general that is only briefly missing (being
// reinstalled) keeps its tasks.
func (k *King) processOrphans(*admission) error {
	now := k.now()
	// The grace is minutes long: one scan a minute is plenty, and keeps a
	// deep backlog from costing a full read of the queue on every tick.
	if now.Sub(k.orphanScan) < orphanScanEvery {
		return nil
	}
	k.orphanScan = now
	live := map[string]bool{}
	installed := map[string]bool{}
	var errs []error
	for _, st := range []string{layout.Pending, layout.InProgress} {
		es, err := k.tasks.List(st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range es {
			var head struct {
				TargetGeneral string `json:"target_general"`
			}
			if e.Decode(&head) != nil || !ids.ValidGeneral(head.TargetGeneral) {
				continue // the general's to reject
			}
			ok, seen := installed[head.TargetGeneral]
			if !seen {
				_, err := os.Stat(k.l.GeneralManifest(head.TargetGeneral))
				ok = err == nil
				installed[head.TargetGeneral] = ok
			}
			if ok {
				continue
			}
			t, err := schema.DecodeTask(e.Data)
			if err != nil || t.ID != e.ID {
				continue
			}
			live[t.ID] = true
			first, ok := k.orphanSince[t.ID]
			if !ok {
				k.orphanSince[t.ID] = now
				continue
			}
			if now.Sub(first) < OrphanGrace {
				continue
			}
			if st == layout.Pending {
				// The king takes the task over; a general claiming it at
				// this very moment wins and keeps it.
				if err := k.tasks.Claim(layout.Pending, layout.InProgress, t.ID); err != nil {
					if !errors.Is(err, queue.ErrTaken) && !errors.Is(err, queue.ErrExists) {
						errs = append(errs, err)
					}
					continue
				}
			}
			terminal := true
			msg := fmt.Sprintf("general %s is not installed (its manifest has been gone for %s)", t.TargetGeneral, now.Sub(first).Round(time.Minute))
			res := &schema.Result{
				RawResult: schema.RawResult{TaskID: t.ID, Status: schema.ResultFailed, Summary: msg, Error: msg,
					ErrorReason: schema.ReasonEngineMissing, Terminal: &terminal},
				General: t.TargetGeneral, CompletedAt: schema.FormatTime(now), RetryCount: t.RetryCount,
			}
			k.log.Warn("failing a task whose general is gone", "task", t.ID, "general", t.TargetGeneral)
			if err := k.finish(t, res); err != nil {
				errs = append(errs, fmt.Errorf("task %s: %w", t.ID, err))
				continue
			}
			delete(k.orphanSince, t.ID)
		}
	}
	for id := range k.orphanSince {
		if !live[id] {
			delete(k.orphanSince, id)
		}
	}
	return errors.Join(errs...)
}
