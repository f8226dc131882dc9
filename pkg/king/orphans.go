package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// OrphanGrace is how long a task's general may be uninstalled (its manifest
// file gone) before the king fails the task. Without this, tasks addressed
// to a general that no longer exists would wait forever and hold slots of
// concurrency.max_soldiers, stopping all dispatch.
const OrphanGrace = 10 * time.Minute

// processOrphans fails the pending and in-progress tasks whose general has
// been uninstalled for OrphanGrace: a ❌ notification, task.failed, task and
// event to completed/. A general that is only briefly missing (being
// reinstalled) keeps its tasks.
func (k *King) processOrphans(*admission) error {
	now := k.now()
	live := map[string]bool{}
	installed := map[string]bool{}
	var errs []error
	for _, st := range []string{layout.Pending, layout.InProgress} {
		idl, err := k.tasks.IDs(st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sort.Strings(idl)
		for _, id := range idl {
			b, err := k.tasks.Read(st, id)
			if err != nil {
				continue // moved meanwhile
			}
			general, ok := taskGeneral(b)
			if !ok {
				continue // unreadable: the general's to reject (Count, List)
			}
			ok, seen := installed[general]
			if !seen {
				_, err := os.Stat(k.l.GeneralManifest(general))
				ok = err == nil
				installed[general] = ok
			}
			if ok {
				continue
			}
			t, err := schema.DecodeTask(b)
			if err != nil || t.ID != id {
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
			msg := fmt.Sprintf("general %s is not installed (its manifest has been gone for %s)", t.TargetGeneral, now.Sub(first).Round(time.Minute))
			res := failedResult(t, doc.ReasonEngineMissing, msg, true)
			res.CompletedAt = doc.FormatTime(now)
			k.log.Warn("failing a task whose general is gone", "task", t.ID, "general", t.TargetGeneral)
			// A pending one the king takes over; a general claiming it at
			// this very moment wins and keeps it.
			if err := k.finish(t, res, st == layout.Pending); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("task %s: %w", t.ID, err))
				}
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

// taskGeneral is the target general a task file names, when valid.
func taskGeneral(b []byte) (string, bool) {
	var head struct {
		TargetGeneral string `json:"target_general"`
	}
	if json.Unmarshal(b, &head) != nil || !ids.ValidGeneral(head.TargetGeneral) {
		return "", false
	}
	return head.TargetGeneral, true
}
