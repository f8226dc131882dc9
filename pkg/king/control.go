package king

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Operator control (SPEC §10.11): the king acts on the requests `start
// pause|resume|task cancel` drop into state/king/control/ (pkg/control owns
// the file formats). Each request is answered in control/replies/ and then
// removed; acting on one twice is harmless (pause keeps its first since,
// cancel finds the task already finished).

// replyRetention is how long an unread reply is kept; cancelRetention how
// long the record of a finished cancelled task is.
const (
	replyRetention  = 24 * time.Hour
	cancelRetention = 7 * 24 * time.Hour
)

// processControl is the tick's control step: queued requests first, then the
// cancelled tasks still in progress (level-triggered: a soldier that a crash
// or a race left alive is killed on a later tick).
func (k *King) processControl() error {
	var errs []error
	paths, err := control.Requests(k.l)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range paths {
		if err := k.handleControl(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := k.enforceCancels(); err != nil {
		errs = append(errs, err)
	}
	k.pruneReplies()
	return errors.Join(errs...)
}

// applyPause makes admission refuse every task while paused.
func (k *King) applyPause(adm *admission) {
	p, err := control.ReadPause(k.l)
	if err != nil {
		k.log.Warn("paused.json unreadable; staying paused", "err", err)
	}
	if p != nil {
		adm.paused = &hold{reason: waits.Pause,
			detail: "paused by " + firstNonEmpty(p.By, "the operator") + " since " + firstNonEmpty(p.Since, "an unknown time") + " (`start resume` lifts it)"}
		adm.operator = adm.paused
	}
}

func (k *King) handleControl(path string) error {
	b, err := queue.ReadLimited(path, queue.DefaultMaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var req control.Request
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err == nil {
		err = req.Validate()
	}
	stem := strings.TrimSuffix(filepath.Base(path), ".json")
	if err == nil && req.ID != stem {
		err = fmt.Errorf("id %q does not match the file name", req.ID)
	}
	var rep control.Reply
	if err != nil {
		rep = control.Reply{ID: stem, OK: false, Message: "request refused: " + err.Error()}
		k.log.Warn("control request refused", "file", path, "err", err)
	} else {
		rep = k.act(&req)
	}
	rep.At = schema.FormatTime(k.now())
	if ids.Valid(rep.ID) {
		if err := layout.EnsureDir(k.l.KingControlReplies()); err != nil {
			return err
		}
		if err := atomicfile.WriteJSON(filepath.Join(k.l.KingControlReplies(), rep.ID+".json"), rep); err != nil {
			return fmt.Errorf("reply to control request %s: %w", rep.ID, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// act carries out one valid request.
func (k *King) act(req *control.Request) control.Reply {
	rep := control.Reply{ID: req.ID, Action: req.Action, TaskID: req.TaskID}
	by := firstNonEmpty(req.By, "operator")
	var err error
	switch req.Action {
	case control.ActionPause:
		rep.Message, err = k.pause(by)
	case control.ActionResume:
		rep.Message, err = k.resume(by)
	case control.ActionCancel:
		rep.Message, err = k.cancel(req.TaskID, by)
	}
	if err != nil {
		rep.Message = err.Error()
		return rep
	}
	rep.OK = true
	k.log.Info("control request done", "action", req.Action, "task", req.TaskID, "by", by, "result", rep.Message)
	return rep
}

func (k *King) pause(by string) (string, error) {
	if p, _ := control.ReadPause(k.l); p != nil && p.Since != "" {
		return "already paused since " + p.Since + " by " + p.By, nil
	}
	p := control.Pause{Since: schema.FormatTime(k.now()), By: by}
	if err := atomicfile.WriteJSON(k.l.KingPaused(), p); err != nil {
		return "", fmt.Errorf("write pause state: %w", err)
	}
	k.em.Emit("system.paused", map[string]any{"by": by, "since": p.Since})
	return "paused: no new task is admitted, schedules are held, running soldiers finish", nil
}

func (k *King) resume(by string) (string, error) {
	err := os.Remove(k.l.KingPaused())
	if errors.Is(err, fs.ErrNotExist) {
		return "not paused", nil
	}
	if err != nil {
		return "", fmt.Errorf("remove pause state: %w", err)
	}
	k.em.Emit("system.resumed", map[string]any{"by": by})
	return "resumed", nil
}

// cancel ends a pending or running task as failed/Cancelled (terminal).
// The cancel record is written before anything is acted on.
func (k *King) cancel(id, by string) (string, error) {
	if !taskIDRE.MatchString(id) {
		return "", fmt.Errorf("%q is not a task id (task-YYYYMMDD-NNN)", id)
	}
	st, ok := k.tasks.Find(id)
	if !ok {
		return "", fmt.Errorf("no task %s", id)
	}
	if st != layout.Pending && st != layout.InProgress {
		return "", fmt.Errorf("task %s already finished (%s)", id, st)
	}
	var t schema.Task
	if err := k.tasks.ReadJSON(st, id, &t); err != nil {
		if st == layout.Pending {
			// Claimed by its general meanwhile.
			st = layout.InProgress
			err = k.tasks.ReadJSON(st, id, &t)
		}
		if err != nil {
			return "", fmt.Errorf("read task %s: %w", id, err)
		}
	}
	rec := control.Cancelled{TaskID: id, RetryCount: t.RetryCount, Was: st, By: by, At: schema.FormatTime(k.now())}
	if err := layout.EnsureDir(k.l.KingCancelledDir()); err != nil {
		return "", err
	}
	if st == layout.Pending {
		if err := atomicfile.WriteJSON(k.l.KingCancelled(id), rec); err != nil {
			return "", err
		}
		// The king takes the task over; a general claiming it at this very
		// moment wins, and the task is cancelled as a running one.
		err := k.tasks.Claim(layout.Pending, layout.InProgress, id)
		if err == nil {
			k.em.Emit("task.cancelled", map[string]any{"task_id": id, "by": by, "was": layout.Pending, "general": t.TargetGeneral})
			if err := k.finish(&t, cancelledResult(&t, by, "")); err != nil {
				return "", err
			}
			return "cancelled " + id + " (it was pending)", nil
		}
		if !errors.Is(err, queue.ErrTaken) && !errors.Is(err, queue.ErrExists) {
			return "", err
		}
		rec.Was = layout.InProgress
	}
	if _, err := os.Stat(k.l.ResultFinal(id)); err == nil {
		return "", fmt.Errorf("task %s already ended its attempt; the king is completing it", id)
	}
	rec.SoldierID = k.soldierOf(id)
	if err := atomicfile.WriteJSON(k.l.KingCancelled(id), rec); err != nil {
		return "", err
	}
	k.em.Emit("task.cancelled", map[string]any{"task_id": id, "by": by, "was": layout.InProgress,
		"soldier_id": rec.SoldierID, "general": t.TargetGeneral})
	k.stopSoldier(&rec)
	msg := "cancelling " + id
	if rec.SoldierID != "" {
		msg += ": soldier " + rec.SoldierID + " and its processes killed"
	}
	return msg + "; " + t.TargetGeneral + " reports it as Cancelled", nil
}

// cancelledResult is the failed/Cancelled outcome of a cancelled task.
func cancelledResult(t *schema.Task, by, soldier string) *schema.Result {
	terminal := true
	msg := "cancelled by " + by
	return &schema.Result{
		RawResult: schema.RawResult{TaskID: t.ID, Status: schema.ResultFailed, Summary: msg, Error: msg,
			ErrorReason: schema.ReasonCancelled, Terminal: &terminal},
		General: t.TargetGeneral, RetryCount: t.RetryCount, SoldierID: soldier,
	}
}

// soldierOf returns the live soldier of a task, from the registry (generals
// register before spawning, §9.12), else the task's -soldier-id file.
func (k *King) soldierOf(task string) string {
	if es, err := sessions.New(k.l).List(); err == nil {
		for _, e := range es {
			if e.TaskID == task {
				return e.ID
			}
		}
	}
	if b, err := os.ReadFile(k.l.ResultSoldierID(task)); err == nil {
		if s := strings.TrimSpace(string(b)); ids.Valid(s) {
			return s
		}
	}
	return ""
}

// stopSoldier makes a running cancelled task end: the Cancelled raw result
// (no-replace: a result the soldier published first stays, and the cancel
// record still turns a failure into Cancelled), then the soldier's whole
// process tree and its tmux session. The general sees the raw result and
// writes the final one as for any attempt.
func (k *King) stopSoldier(rec *control.Cancelled) {
	raw := cancelledResult(&schema.Task{ID: rec.TaskID}, rec.By, "").RawResult
	raw.RetryCount = rec.RetryCount
	if b, err := json.MarshalIndent(raw, "", "  "); err == nil {
		if err := atomicfile.CreateNoReplace(k.l.ResultRaw(rec.TaskID), append(b, '\n'), 0o600); err != nil && !errors.Is(err, atomicfile.ErrExists) {
			k.log.Error("write cancelled raw result", "task", rec.TaskID, "err", err)
		}
	}
	if rec.SoldierID == "" || k.tm == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alive, err := k.tm.Has(ctx, rec.SoldierID)
	if err != nil || !alive {
		return
	}
	var tree []proctree.Proc
	if pid, err := k.tm.PanePID(ctx, rec.SoldierID); err == nil {
		tree = proctree.Descendants(pid) // while the parents still live
	}
	if err := k.tm.Kill(ctx, rec.SoldierID); err != nil {
		k.log.Warn("kill cancelled soldier session", "soldier", rec.SoldierID, "err", err)
	}
	proctree.Kill(tree)
	k.log.Info("cancelled soldier killed", "task", rec.TaskID, "soldier", rec.SoldierID, "processes", len(tree))
}

// enforceCancels re-checks every cancelled task still in progress: its
// soldier must be gone and its Cancelled raw result present. Records of
// finished tasks are removed.
func (k *King) enforceCancels() error {
	ents, err := os.ReadDir(k.l.KingCancelledDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		task, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(e.Name(), ".") || !taskIDRE.MatchString(task) {
			continue
		}
		rec := control.ReadCancelled(k.l, task)
		if rec == nil {
			continue
		}
		st, found := k.tasks.Find(task)
		switch {
		case !found || st == layout.Completed || st == layout.Rejected:
			// Kept for `start tasks` as long as finished tasks are listed.
			if at, err := schema.ParseTime(rec.At); err == nil && k.now().Sub(at) > cancelRetention {
				os.Remove(k.l.KingCancelled(task))
			}
		case st == layout.Pending:
			// A retry re-queued it before the record took effect.
			var t schema.Task
			if k.tasks.ReadJSON(layout.Pending, task, &t) == nil &&
				k.tasks.Claim(layout.Pending, layout.InProgress, task) == nil {
				if err := k.finish(&t, cancelledResult(&t, rec.By, "")); err != nil {
					return err
				}
			}
		case st == layout.InProgress:
			if _, err := os.Stat(k.l.ResultFinal(task)); err == nil {
				continue // the results step completes it
			}
			if s := k.soldierOf(task); s != "" {
				rec.SoldierID = s
			}
			k.stopSoldier(rec)
		}
	}
	return nil
}

// cancelOverride turns a failure of a cancelled task into Cancelled, so
// whatever killed the attempt (the cancel itself, a soldier that exited as
// it was killed) it is never retried.
func (k *King) cancelOverride(t *schema.Task, res *schema.Result) {
	if res.Status != schema.ResultFailed && res.Status != schema.ResultKilled {
		return
	}
	if res.ErrorReason == schema.ReasonCancelled {
		return
	}
	rec := control.ReadCancelled(k.l, t.ID)
	if rec == nil || rec.RetryCount != t.RetryCount {
		return
	}
	terminal := true
	res.Status, res.ErrorReason, res.Terminal = schema.ResultFailed, schema.ReasonCancelled, &terminal
	res.Error = "cancelled by " + rec.By + " (" + firstNonEmpty(res.Error, "no detail") + ")"
}

// pruneReplies removes replies nobody read within replyRetention.
func (k *King) pruneReplies() {
	ents, err := os.ReadDir(k.l.KingControlReplies())
	if err != nil {
		return
	}
	now := k.now()
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > replyRetention {
			os.Remove(filepath.Join(k.l.KingControlReplies(), e.Name()))
		}
	}
}

// cancelledFinal reports whether a final failure is a cancel (⛔, not ❌).
func cancelledFinal(res *schema.Result) bool {
	return res.ErrorReason == schema.ReasonCancelled
}
