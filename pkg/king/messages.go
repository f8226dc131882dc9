package king

import (
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Message ids the king writes (docs/ARCHITECTURE.md): deterministic, so a
// repeated step after a crash finds its message already queued (or sent)
// and writes nothing (SPEC §9.3).
func msgStartID(task string) string        { return "msg-" + task + "-start" }
func msgFinalID(task, kind string) string  { return "msg-" + task + "-" + kind }
func msgQuestionID(task string) string     { return "msg-" + task + "-question" }
func msgProclamationID(task string) string { return "msg-" + task + "-proclamation" }
func msgReplyID(event string) string       { return "msg-" + event + "-reply" }

// putMessage queues m unless its id is already in any messages state.
// It reports whether it wrote the message.
func (k *King) putMessage(m *doc.Message) (bool, error) {
	k.fillMessage(m)
	return putOnceMessage(m, k.msgs.PutOnce(layout.Pending, m.ID, m))
}

// putMessageIn is putMessage within a queue group.
func (k *King) putMessageIn(g *queue.GroupTx, m *doc.Message) (bool, error) {
	k.fillMessage(m)
	return putOnceMessage(m, g.PutOnce(k.msgs, layout.Pending, m.ID, m))
}

func putOnceMessage(m *doc.Message, err error) (bool, error) {
	if errors.Is(err, queue.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("queue message %s: %w", m.ID, err)
	}
	return true, nil
}

// fillMessage sets a new message's defaults.
func (k *King) fillMessage(m *doc.Message) {
	if m.CreatedAt == "" {
		m.CreatedAt = doc.FormatTime(k.now())
	}
	if m.Urgency == "" {
		m.Urgency = doc.UrgencyNormal
	}
	m.Status = doc.MessagePending
}

// sourceRef returns {channel, ts} of a Slack-originated event, else nil.
func sourceRef(ev *doc.Event) *doc.SourceRef {
	if ev.Source != doc.SourceSlack {
		return nil
	}
	ch, _ := ev.Payload["channel"].(string)
	ts, _ := ev.Payload["ts"].(string)
	if ch == "" || ts == "" {
		return nil
	}
	return &doc.SourceRef{Channel: ch, TS: ts}
}

func strPtr(s string) *string { return &s }

// threadStart is the message that opens a task's Slack thread. For Slack
// events the source DM becomes the parent (source_ref); a resume task reuses
// the original thread (thread_ts, SPEC §9.8).
func threadStart(ev *doc.Event, t *doc.Task) *doc.Message {
	repo := doc.Deref(t.Repo)
	content := fmt.Sprintf("🎯 %s took %s (%s)", t.TargetGeneral, t.ID, t.Type)
	if repo != "" {
		content += " in " + repo
	}
	if title, _ := ev.Payload["subject_title"].(string); title != "" {
		content += ": " + redact.Clip(title, 200)
	} else if sum, _ := ev.Payload["summary"].(string); sum != "" {
		content += ": " + redact.Clip(sum, 200)
	}
	m := &doc.Message{
		ID:        msgStartID(t.ID),
		Type:      doc.MessageThreadStart,
		TaskID:    strPtr(t.ID),
		Urgency:   doc.UrgencyNormal,
		Content:   content,
		SourceRef: sourceRef(ev),
		Context: map[string]any{
			"event_id": ev.ID, "event_type": ev.Type, "source": ev.Source,
			"general": t.TargetGeneral, "task_type": t.Type, "repo": t.Repo, "priority": t.Priority,
		},
	}
	if url, _ := ev.Payload["subject_url"].(string); url != "" {
		m.Context["url"] = url
	} else if url, _ := ev.Payload["url"].(string); url != "" {
		m.Context["url"] = url
	}
	if t.Thread != nil {
		m.ThreadTS = strPtr(t.Thread.ThreadTS)
		m.Channel = t.Thread.Channel
	}
	return m
}
