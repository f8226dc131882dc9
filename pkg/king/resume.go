package king

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Slack event types the king treats specially.
const (
	TypeThreadReply    = "slack.thread.reply"
	TypeChannelMessage = "slack.channel.message"
	TypeAppMention     = "slack.app_mention"
)

var taskIDRE = regexp.MustCompile(`^task-[0-9]{8}-[0-9]{3,}$`)

// replyContext extracts the reply_context of a slack.thread.reply event and
// says why it is unusable ("" when usable).
func (k *King) replyContext(ev *doc.Event) (*doc.ReplyContext, string) {
	raw, ok := ev.Payload["reply_context"]
	if !ok || raw == nil {
		return nil, "thread reply without reply_context"
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, "reply_context is not an object"
	}
	var rc doc.ReplyContext
	if err := json.Unmarshal(b, &rc); err != nil {
		return nil, "reply_context is malformed: " + err.Error()
	}
	switch {
	case !ids.ValidGeneral(rc.General):
		return nil, "reply_context has no valid general"
	case k.routes.Manifest(rc.General) == nil:
		return nil, "reply_context names general " + rc.General + ", which is not installed"
	case !taskIDRE.MatchString(rc.TaskID):
		return nil, "reply_context has no valid task_id"
	}
	return &rc, ""
}

// handleReply turns a human's thread reply into a high-priority resume task
// for the general that asked (SPEC §4.4, §9.8).
func (k *King) handleReply(ev *doc.Event, adm *admission) error {
	rc, reason := k.replyContext(ev)
	if reason == "" {
		reason = k.withdrawn(rc.TaskID)
	}
	if reason != "" {
		return k.discard(ev, layout.Pending, reason)
	}
	if h := adm.holdFor(doc.PriorityHigh, rc.General); h != nil {
		k.waiting(ev.ID, "", h)
		return nil
	}
	lost := k.affinityLost(k.askingHost(rc.TaskID))
	if err := k.dispatchAll([]routed{{ev: ev, general: rc.General}}, layout.Pending); err != nil {
		return err
	}
	if ev.TaskID == "" {
		return nil // its thread is a parked item (breaker.go)
	}
	if lost != "" {
		return k.failAtOnce(ev.TaskID, doc.ReasonSessionLost, lost)
	}
	adm.inFlight++
	return nil
}

// askingHost is the host that ran task (recorded in the completed task,
// else its claim); "" when unknown.
func (k *King) askingHost(task string) string {
	var t doc.Task
	if k.tasks.ReadJSON(layout.Completed, task, &t) == nil && t.Host != "" {
		return t.Host
	}
	return k.ranOn(task)
}

// failAtOnce ends a just-dispatched pending task with a terminal failure
// (its ❌ says why), as a cancel of a pending task does: it leaves pending/
// in the transaction that ends it, so no general runs it.
func (k *King) failAtOnce(id, reason, msg string) error {
	var t doc.Task
	if err := k.tasks.ReadJSON(layout.Pending, id, &t); err != nil {
		return fmt.Errorf("read task %s: %w", id, err)
	}
	if err := k.finish(&t, failedResult(&t, reason, msg, true), true); err != nil {
		return fmt.Errorf("end task %s: %w", id, err)
	}
	return nil
}

// resumeFields makes t the resume task of rc's needs_human task: same
// general, session, repo; the workdir and thread from its checkpoint
// (SPEC §9.8), so the soldier resumes in place and the envoy keeps the
// thread.
func (k *King) resumeFields(t *doc.Task, ev *doc.Event, rc *doc.ReplyContext) {
	t.Type = doc.TaskTypeResume
	t.Priority = doc.PriorityHigh
	t.SessionID = rc.SessionID
	t.OriginalTaskID = rc.TaskID
	if rc.Repo != nil && *rc.Repo != "" {
		t.Repo = rc.Repo
	}
	t.Payload["original_task_id"] = rc.TaskID
	// The session and workspace live on the host that asked; only that
	// host may run the resume (SPEC §11.7).
	t.Host = k.askingHost(rc.TaskID)
	if text, ok := ev.Payload["text"].(string); ok {
		t.Payload["reply_text"] = text
	}
	if cp := k.checkpoint(rc.TaskID); cp != nil {
		t.Workdir = cp.Workdir
		if cp.Thread != nil && cp.Thread.Channel != "" && cp.Thread.ThreadTS != "" {
			t.Thread = cp.Thread
		}
		if t.SessionID == "" {
			t.SessionID = cp.SessionID
		}
	} else {
		k.log.Warn("checkpoint missing or unreadable; resuming without workdir", "task", rc.TaskID)
	}
	if t.Workdir == "" && rc.Workdir != "" {
		t.Workdir = rc.Workdir // a kept conversation (the general checks it)
	}
	if t.Thread == nil {
		ch, ts := rc.Channel, rc.ThreadTS
		if ch == "" {
			ch, _ = ev.Payload["channel"].(string)
		}
		if ts == "" {
			ts, _ = ev.Payload["thread_ts"].(string)
		}
		if ch != "" && ts != "" {
			t.Thread = &doc.Thread{Channel: ch, ThreadTS: ts}
		}
	}
}

// withdrawn says why a reply to task's question starts nothing: the
// operator cancelled the task while it waited for the answer
// (withdrawQuestion). "" when the question stands.
func (k *King) withdrawn(task string) string {
	if rec := control.ReadCancelled(k.ctx(), k.kv, task); rec != nil {
		return "task " + task + " was cancelled by " + firstNonEmpty(rec.By, "the operator") + "; its question is withdrawn"
	}
	// The record is kept a week; the task's own status says it for good (a
	// question or a kept conversation never belongs to a failed task).
	var t doc.Task
	if k.tasks.ReadJSON(layout.Completed, task, &t) == nil && t.Status == doc.ResultFailed {
		return "task " + task + " ended failed; a reply to it starts nothing"
	}
	return ""
}
