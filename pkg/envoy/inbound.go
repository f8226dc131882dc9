package envoy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Event types the envoy produces.
const (
	EventChannelMessage = "slack.channel.message"
	EventAppMention     = "slack.app_mention"
	EventThreadReply    = "slack.thread.reply"
)

// RefusalText is the short answer to someone not on the allowlist.
const RefusalText = "Sorry, I only take requests from people on my allowlist. Ask the operator to add you to `slack.allowed_users`."

// Inbound is a Slack message as the envoy sees it, independent of how it
// arrived (Socket Mode or `envoy reply`).
type Inbound struct {
	EventID     string // Slack event_id ("" for console replies)
	Kind        string // "message" or "app_mention"
	Channel     string
	ChannelType string // "im", "channel", "group", "mpim"
	User        string
	BotID       string
	SubType     string
	Text        string
	TS          string
	ThreadTS    string
	// Console marks a reply played with `envoy reply` by the operator at the
	// machine: the allowlist does not apply.
	Console bool
	// Button marks an answer given with the Answer button: its record
	// allowed the user (the asker or the allowlist, buttons.go).
	Button bool
}

// followUp is what to do after the envelope is acknowledged: slow Web API
// calls that must not delay the ack.
type followUp struct {
	react  *reaction
	refuse *post
}

// seenEventTTL bounds the in-memory event_id dedupe (Slack redelivers within
// minutes).
const seenEventTTL = time.Hour

// rememberEvent records a Slack event_id and reports whether it was new.
func (e *Envoy) rememberEvent(id string) bool {
	if id == "" {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	if _, ok := e.seenEvt[id]; ok {
		return false
	}
	if len(e.seenEvt) > 1000 {
		for k, t := range e.seenEvt {
			if now.Sub(t) > seenEventTTL {
				delete(e.seenEvt, k)
			}
		}
	}
	e.seenEvt[id] = now
	return true
}

func (e *Envoy) forgetEvent(id string) {
	if id == "" {
		return
	}
	e.mu.Lock()
	delete(e.seenEvt, id)
	e.mu.Unlock()
}

// self is our bot's user and bot id, once known ("" in console mode).
func (e *Envoy) self() (user, bot string) {
	if e.web == nil {
		return "", ""
	}
	return e.web.self()
}

// handleInbound turns one Slack message into at most one event (SPEC §4.7).
// It returns the follow-up Web API calls to make after the ack. An error
// means the event could not be stored: the envelope should not be
// acknowledged, so Slack delivers it again.
func (e *Envoy) handleInbound(ctx context.Context, in Inbound) (followUp, error) {
	selfUser, selfBot := e.self()
	switch {
	case in.BotID != "" || in.User == "":
		return followUp{}, nil // bots, including ourselves
	case selfUser != "" && in.User == selfUser, selfBot != "" && in.BotID == selfBot:
		return followUp{}, nil
	}
	switch in.SubType {
	case "", "thread_broadcast", "file_share":
	default:
		return followUp{}, nil // edits, deletions, joins…
	}
	if in.TS == "" || in.Channel == "" {
		return followUp{}, nil
	}

	now := e.clock.Now()
	isReply := in.ThreadTS != "" && in.ThreadTS != in.TS
	var (
		typ, id  string
		priority = doc.PriorityNormal
		rc       *doc.ReplyContext
		awaited  string // task id whose awaited entry the reply answers
	)
	if isReply {
		var conv Conversation
		var aw Awaited
		var isAw, isConv bool
		if err := e.st.view(ctx, func(s *State) {
			aw, isAw = s.awaitedByThread(in.Channel, in.ThreadTS)
			conv, isConv = s.liveConversation(in.Channel, in.ThreadTS, now)
		}); err != nil {
			return followUp{}, err
		}
		switch {
		case isAw:
			typ, rc, awaited = EventThreadReply, aw.ReplyContext, aw.TaskID
			if rc == nil {
				rc = &doc.ReplyContext{TaskID: aw.TaskID}
			}
		case isConv && (conv.UserID == "" || conv.UserID == in.User || in.Console):
			// A conversation continues with the user who started it.
			typ, rc = EventThreadReply, conv.ReplyContext
		}
		if typ == EventThreadReply {
			id = "evt-slack-reply-" + ids.SlackTS(in.ThreadTS) + "-" + ids.SlackTS(in.TS)
			priority = doc.PriorityHigh
		}
	}
	if typ == "" {
		if isReply && e.admit.Known("evt-slack-reply-"+ids.SlackTS(in.ThreadTS)+"-"+ids.SlackTS(in.TS)) {
			// Slack delivers an @mention in a thread twice (message and
			// app_mention); the first already answered the awaited
			// question, the second must not start new work.
			return followUp{}, nil
		}
		switch {
		case in.Kind == "app_mention":
			typ, id = EventAppMention, "evt-slack-mention-"+ids.SlackTS(in.TS)
		case in.Kind == "message" && in.ChannelType == "im" && !isReply:
			typ, id = EventChannelMessage, "evt-slack-msg-"+ids.SlackTS(in.TS)
		default:
			return followUp{}, nil // chatter in threads and channels we do not follow
		}
	}
	if !e.rememberEvent(in.EventID) {
		return followUp{}, nil // Slack redelivered an envelope we handled
	}
	if !in.Console && !in.Button && !e.config().Allowed(in.User) {
		e.log.Info("refused a message from a user not on the allowlist", "user", in.User, "channel", in.Channel)
		e.em.Emit("event.refused", map[string]any{"user_id": in.User, "channel": in.Channel, "type": typ})
		thread := in.ThreadTS
		if thread == "" {
			thread = in.TS
		}
		return followUp{refuse: &post{Channel: in.Channel, ThreadTS: thread, Text: RefusalText,
			MsgID: "refusal-" + ids.SlackTS(in.TS), Type: "refusal"}}, nil
	}

	payload := map[string]any{
		"text": in.Text, "user_id": in.User, "channel": in.Channel, "ts": in.TS, "thread_ts": nil,
	}
	if in.ThreadTS != "" {
		payload["thread_ts"] = in.ThreadTS
	}
	var repo *string
	if rc != nil {
		payload["reply_context"] = rc
		repo = rc.Repo
	}
	ev := doc.Event{ID: id, Type: typ, Source: doc.SourceSlack, Repo: repo, Payload: payload,
		Priority: priority, CreatedAt: doc.FormatTime(now), Status: doc.EventPending}
	if err := e.admit.Admit(id, ev); err != nil {
		if errors.Is(err, queue.ErrDuplicate) {
			// A redelivery of a reply admitted before a crash: finish what
			// that run could not — the awaited entry must go, or a later
			// message in the thread would resume the task twice (§9.8).
			e.answered(ctx, awaited)
			return followUp{}, nil
		}
		if errors.Is(err, ids.ErrInvalid) {
			e.log.Warn("slack message with an unusable ts ignored", "err", err)
			return followUp{}, nil
		}
		e.forgetEvent(in.EventID)
		return followUp{}, fmt.Errorf("admit %s: %w", id, err)
	}
	e.em.Emit("event.detected", map[string]any{"event_id": id, "event_type": typ, "source": doc.SourceSlack, "priority": priority})
	e.log.Info("event queued", "event_id", id, "type", typ)
	// The first accepted reply answers the question (SPEC §9.8).
	e.answered(ctx, awaited)
	var f followUp
	if typ != EventThreadReply && !in.Console {
		f.react = &reaction{channel: in.Channel, ts: in.TS, name: ReactionReceived}
	}
	return f, nil
}

// answered drops task's awaited entry ("" = none): it has its answer.
func (e *Envoy) answered(ctx context.Context, task string) {
	if task == "" {
		return
	}
	if err := e.st.update(ctx, func(s *State) error {
		delete(s.Awaiting, task)
		return nil
	}); err != nil {
		e.log.Error("awaited entry not cleared", "task_id", task, "err", err)
	}
}

// doFollowUp makes the Web API calls of a handled message (best effort).
func (e *Envoy) doFollowUp(ctx context.Context, f followUp) {
	if f.react != nil {
		if err := e.poster.React(ctx, f.react.channel, f.react.ts, f.react.name); err != nil {
			e.log.Warn("reaction not added", "reaction", f.react.name, "err", redact(err))
		}
	}
	if f.refuse != nil {
		if _, _, err := e.poster.Post(ctx, *f.refuse); err != nil {
			e.log.Warn("refusal not posted", "channel", f.refuse.Channel, "err", redact(err))
		}
	}
}
