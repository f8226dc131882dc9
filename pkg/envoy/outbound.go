package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// Reaction names (Slack emoji names, without colons).
const (
	ReactionReceived = "eyes"
	ReactionDone     = "white_check_mark"
	ReactionFailed   = "x"
	ReactionSkipped  = "black_right_pointing_double_triangle_with_vertical_bar"
)

// ProclamationPrefix starts the task id of a proclamation (seed 003): it is
// never a mapped task, so the message is posted as a new channel message.
const ProclamationPrefix = "proclamation-"

var finalEmoji = map[string]string{
	doc.FinalDone:    "✅",
	doc.FinalFailed:  "❌",
	doc.FinalSkipped: "⏭️",
}

var finalReaction = map[string]string{
	doc.FinalDone:    ReactionDone,
	doc.FinalFailed:  ReactionFailed,
	doc.FinalSkipped: ReactionSkipped,
}

// maxInlineWait is the longest Retry-After waited inside a tick.
const maxInlineWait = 30 * time.Second

// errHeld means Slack asked us to pause all sends for a while.
var errHeld = errors.New("rate limited by Slack, sends held")

// ConsoleChannel is where console mode prints a message that names no
// channel when no default channel is configured.
const ConsoleChannel = "console"

// ErrNoChannel is a message with no channel and no default channel.
var ErrNoChannel = errors.New("no channel: message has none and no default channel is configured (SLACK_DEFAULT_CHANNEL or envoy.yaml slack.default_channel)")

// target is where a message goes and what it does to the state.
type target struct {
	channel  string
	threadTS string // "" = top level
	noPost   bool   // thread_start onto an existing thread with nothing to say
}

// taskKey is the message's task id as a thread-mapping key ("" when the
// message belongs to no mapped task: none, or a proclamation).
func taskKey(m *doc.Message) string {
	t := doc.Deref(m.TaskID)
	if strings.HasPrefix(t, ProclamationPrefix) {
		return ""
	}
	return t
}

// resolve decides where m is posted, from the current state (pure).
func (e *Envoy) resolve(m *doc.Message, s *State) (target, error) {
	def := e.config().DefaultChannel()
	explicit := m.Channel
	threadTS := doc.Deref(m.ThreadTS)
	key := taskKey(m)
	mp, mapped := s.Mappings[key]
	if key == "" {
		mp, mapped = ThreadMapping{}, false
	}
	orDefault := func(chs ...string) string {
		for _, c := range chs {
			if c != "" {
				return c
			}
		}
		return def
	}
	var t target
	switch m.Type {
	case doc.MessageThreadStart:
		switch {
		case threadTS != "": // resume: map onto the existing thread (SPEC §9.8)
			src := ""
			if m.SourceRef != nil {
				src = m.SourceRef.Channel
			}
			t = target{channel: orDefault(explicit, mp.Channel, src), threadTS: threadTS, noPost: strings.TrimSpace(m.Content) == ""}
		case m.SourceRef != nil: // the DM that asked becomes the parent
			t = target{channel: m.SourceRef.Channel, threadTS: m.SourceRef.TS}
		default:
			t = target{channel: orDefault(explicit)}
		}
	case doc.MessageNotification:
		switch {
		case mapped && (explicit == "" || explicit == mp.Channel):
			t = target{channel: mp.Channel, threadTS: mp.ThreadTS}
		case threadTS != "":
			t = target{channel: orDefault(explicit), threadTS: threadTS}
		default: // notify_channel override, or no thread: a channel message
			t = target{channel: orDefault(explicit)}
		}
	case doc.MessageReport:
		t = target{channel: orDefault(explicit), threadTS: threadTS}
	default: // thread_update, thread_reply, human_input_request
		switch {
		case threadTS != "":
			t = target{channel: orDefault(explicit, mp.Channel), threadTS: threadTS}
		case mapped:
			t = target{channel: mp.Channel, threadTS: mp.ThreadTS}
		case m.SourceRef != nil:
			t = target{channel: m.SourceRef.Channel, threadTS: m.SourceRef.TS}
		default:
			t = target{channel: orDefault(explicit)}
		}
	}
	if t.channel == "" && e.Console() {
		// The console prints everything; a channel only names where.
		t.channel = ConsoleChannel
	}
	if t.channel == "" {
		return t, ErrNoChannel
	}
	return t, nil
}

// text is what is posted for m: the content as data (redacted and escaped,
// SPEC §10.13), with the completion emoji in front of a final notification
// as our markup.
func text(m *doc.Message) string {
	var t slackText
	c := m.Content
	if m.Final != nil && !isCancelled(m) {
		if em := finalEmoji[*m.Final]; em != "" {
			t.markup(em + " ")
			c = strings.TrimPrefix(strings.TrimPrefix(c, em), " ")
		}
	}
	// The urgency mark is our markup too; it goes in front of everything.
	return withUrgency(m, t.data(c).String())
}

// deliver sends one message through the steps of send.go. Returning an
// error means "try again next tick" (disk trouble, Slack's hold); Slack's
// refusals end in failed/.
func (e *Envoy) deliver(ctx context.Context, ent queue.Entry) error {
	// List has validated the file (schema, id = file name) and rejected it
	// if it failed; decoding it again through the schema would validate it
	// twice more for nothing.
	m := new(doc.Message)
	err := json.Unmarshal(ent.Data, m)
	if err == nil && m.ID != ent.ID {
		err = fmt.Errorf("id %q does not match the file name %s.json", m.ID, ent.ID)
	}
	if err != nil {
		e.log.Warn("invalid message rejected", "msg_id", ent.ID, "err", err)
		return e.messages.Reject(layout.Pending, ent.ID, err.Error())
	}
	if done, err := e.finishedBefore(m.ID); done || err != nil {
		return err
	}

	var (
		t          target
		d          Delivery
		recorded   bool
		resolveErr error
		unknown    bool // a post in doubt that could not be looked for (deliveries.go)
	)
	if err := e.st.view(ctx, func(s *State) {
		d, recorded = s.Deliveries[m.ID]
		t, resolveErr = e.resolve(m, s)
	}); err != nil {
		return err
	}
	if ud, ok := e.unrecordedDelivery(m.ID); ok && !recorded {
		d, recorded = ud, true // posted before the disk filled: record, never repost
	}
	if !recorded {
		if resolveErr != nil {
			return e.finish(ctx, ent, m, e.failed(resolveErr))
		}
		p := post{Channel: t.channel, ThreadTS: t.threadTS, Text: text(m), MsgID: m.ID, Type: m.Type, TaskID: doc.Deref(m.TaskID)}
		doubt, foundTS := doubtPost, ""
		if !t.noPost {
			if doubt, foundTS, err = e.settleDoubt(ctx, m, p); err != nil {
				return err
			}
		}
		// No post (noPost), found posted, or cannot tell (unknown): no ts
		// but the one found.
		d = Delivery{Channel: t.channel, TS: foundTS, ThreadTS: t.threadTS}
		unknown = doubt == doubtUnknown
		if !t.noPost && doubt == doubtPost {
			// The buttons' records, then the delivery's, before the post:
			// one that cannot be written means no post.
			if err := e.makeButtons(ctx, m, t, &p); err != nil {
				return e.holdForDisk(ctx, err)
			}
			if err := e.st.begin(ctx, m.ID); err != nil {
				return e.holdForDisk(ctx, err)
			}
			e.step("begun", m.ID)
			ch, ts, perr := e.postWithRetry(ctx, p)
			if perr != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(perr, errHeld) {
					return perr
				}
				return e.finish(ctx, ent, m, e.failed(perr))
			}
			if ch == "" {
				ch = t.channel
			}
			d = Delivery{Channel: ch, TS: ts, ThreadTS: t.threadTS}
			e.postedButtons(ctx, p, ch, ts)
		}
		d.At = doc.FormatTime(e.clock.Now())
	}

	var react []reaction
	if err := e.st.record(ctx, m.ID, d, func(s *State) {
		react = e.bookkeep(m, d, s)
	}); err != nil {
		e.setUnrecorded(m.ID, &d)
		return e.holdForDisk(ctx, err)
	}
	e.setUnrecorded(m.ID, nil)
	e.recordWritten()
	e.step("recorded", m.ID)
	for _, r := range react {
		if r.remove {
			if err := e.poster.Unreact(ctx, r.channel, r.ts, r.name); err != nil {
				e.log.Warn("reaction not removed", "msg_id", m.ID, "reaction", r.name, "err", redact(err))
			}
			continue
		}
		if err := e.poster.React(ctx, r.channel, r.ts, r.name); err != nil {
			e.log.Warn("reaction not added", "msg_id", m.ID, "reaction", r.name, "err", redact(err))
		}
	}
	if m.Final != nil && taskKey(m) != "" {
		e.closeTaskButtons(ctx, taskKey(m), m.ID)
	}
	slackDoc := map[string]any{"channel": d.Channel, "ts": d.TS}
	if unknown {
		slackDoc = map[string]any{"channel": d.Channel, "delivery": "unknown"}
	}
	// A message sent again (envoy retry) loses the reason it failed.
	return e.finish(ctx, ent, m, outcome{state: layout.Sent, d: d, extra: map[string]any{
		"slack": slackDoc, "error": nil, configCauseField: nil}})
}

type reaction struct {
	channel, ts, name string
	remove            bool // take our reaction off instead of adding it
}

// bookkeep applies what a delivered message means for the state and returns
// the reactions to add. It is idempotent: a repeat after a crash rewrites
// the same entries.
func (e *Envoy) bookkeep(m *doc.Message, d Delivery, s *State) []reaction {
	key := taskKey(m)
	thread := d.ThreadTS
	if thread == "" {
		thread = d.TS // a top-level post starts its own thread
	}
	now := doc.FormatTime(e.clock.Now())
	var out []reaction
	switch m.Type {
	case doc.MessageThreadStart:
		if key != "" {
			s.Mappings[key] = ThreadMapping{Channel: d.Channel, ThreadTS: thread, SourceRef: m.SourceRef, CreatedAt: now}
		}
	case doc.MessageHumanInputRequest:
		if key != "" {
			rc := m.ReplyContext
			if rc != nil {
				rc = inThread(*rc, d.Channel, thread)
			}
			s.Awaiting[key] = Awaited{TaskID: key, Channel: d.Channel, ThreadTS: thread, ReplyContext: rc, MsgID: m.ID, CreatedAt: now}
			if _, ok := s.Mappings[key]; !ok {
				s.Mappings[key] = ThreadMapping{Channel: d.Channel, ThreadTS: thread, SourceRef: m.SourceRef, CreatedAt: now}
			}
		}
	case doc.MessageNotification:
		if m.Final != nil && key != "" {
			src := m.SourceRef
			if mp, ok := s.Mappings[key]; ok && mp.SourceRef != nil {
				src = mp.SourceRef
			}
			if src != nil && finalReactionOf(m) != "" {
				// The work is done: ✅/❌/⏭️/🚫 replaces 👀.
				out = append(out, reaction{src.Channel, src.TS, finalReactionOf(m), false},
					reaction{src.Channel, src.TS, ReactionReceived, true})
			}
			delete(s.Mappings, key)
			delete(s.Awaiting, key)
		}
	case doc.MessageThreadReply:
		if key == "" && m.TaskID == nil && m.SourceRef != nil {
			// A direct answer to a DM (the king's petition reply) is the
			// whole of the work on it: 👀 goes.
			out = append(out, reaction{m.SourceRef.Channel, m.SourceRef.TS, ReactionReceived, true})
		}
	}
	if tc := m.TrackConversation; tc != nil {
		ttl := time.Duration(tc.TTLSeconds) * time.Second
		if ttl <= 0 {
			ttl = e.config().ConversationTTL()
		}
		s.Conversations[convKey(d.Channel, thread)] = Conversation{Channel: d.Channel, ThreadTS: thread,
			ReplyContext: inThread(tc.ReplyContext, d.Channel, thread), ExpiresAt: doc.FormatTime(e.clock.Now().Add(ttl)), UserID: tc.UserID}
	}
	return out
}

// inThread is rc with the channel and thread it names none of set.
func inThread(rc doc.ReplyContext, channel, thread string) *doc.ReplyContext {
	if rc.Channel == "" {
		rc.Channel = channel
	}
	if rc.ThreadTS == "" {
		rc.ThreadTS = thread
	}
	return &rc
}

// postWithRetry makes up to retry.max_attempts attempts in total (SPEC
// §9.28), waiting 1 s, 2 s, 4 s… between them, or what a rate limit's
// Retry-After asks.
func (e *Envoy) postWithRetry(ctx context.Context, p post) (string, string, error) {
	attempts := max(e.config().Retry.MaxAttempts, 1)
	var last error
	limited := 0
	for attempt := 1; attempt <= attempts; attempt++ {
		ch, ts, err := e.poster.Post(ctx, p)
		if err == nil {
			return ch, ts, nil
		}
		last = err
		var rl *slack.RateLimitedError
		isLimit := errors.As(err, &rl) && rl.RetryAfter > 0
		if isLimit && limited < maxRateLimitWaits {
			// Slack said "later", not "no": waiting does not use up an
			// attempt, or a burst of alerts would lose messages.
			limited++
			attempt--
		} else if attempt == attempts {
			break
		}
		if ctx.Err() != nil {
			break
		}
		wait := time.Second << max(attempt-1, 0)
		if isLimit {
			wait = rl.RetryAfter
			if wait > maxInlineWait {
				// Too long to block the tick (and the heartbeat): hold every
				// send until then; the message stays pending, no attempt lost.
				e.mu.Lock()
				e.holdUntil = e.clock.Now().Add(wait)
				e.mu.Unlock()
				return "", "", fmt.Errorf("post %s: %w for %v", p.MsgID, errHeld, wait)
			}
		}
		e.log.Warn("slack send failed, retrying", "msg_id", p.MsgID, "attempt", attempt, "wait", wait, "err", redact(err))
		if err := e.sleep(ctx, wait); err != nil {
			return "", "", err
		}
	}
	return "", "", fmt.Errorf("post %s to %s: %d attempts: %w", p.MsgID, p.Channel, attempts, last)
}

// maxRateLimitWaits bounds the 429 waits of one message that do not count
// as attempts (a misbehaving endpoint must not keep the envoy forever).
const maxRateLimitWaits = 10

// failed is the end of a message that could not be sent: failed/, with
// the error. A failure the envoy's config can cause is marked with the
// config it happened under, so that a change of config sends it once more
// (retry.go).
func (e *Envoy) failed(cause error) outcome {
	msg := redact(cause)
	extra := map[string]any{"error": msg, configCauseField: nil}
	if configCaused(cause) {
		extra[configCauseField] = e.configFingerprint()
	}
	return outcome{state: layout.Failed, errMsg: msg, extra: extra}
}

// redact renders an error for logs and files without secrets.
func redact(err error) string {
	if err == nil {
		return ""
	}
	return logging.Redact(err.Error())
}
