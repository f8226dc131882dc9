package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Buttons (SPEC §12.5). A message that asks for an operator's hand carries
// buttons under its text:
//
//   - a needs_human question: Answer (a modal with one text input, whose
//     submission is the human's reply exactly as a thread reply: the same
//     slack.thread.reply event, reply_context and resume) and Cancel task;
//   - a task's thread start: Cancel task, until the task's final
//     notification lands (the start is then updated in place without it);
//   - a ❌ (a failed final that is no cancel): Retry;
//   - a park alert (a message whose context names the park: "park" =
//     "general:<name>" or "item:<key>", pkg/parks): Unpark.
//
// A button's value is the id of a record in the store (kv NSButtons, key
// "btn-<random>") binding the task, its attempt (retry_count), the
// message, the action, the users allowed (the task's asker and
// slack.allowed_users) and an expiry (envoy.yaml buttons.ttl_hours). The
// record is written before the message is posted.
//
// A click's envelope is acked at once. The action is then resolved by
// compare-and-swap on the record, in one fenced store transaction:
// state "open" → "used" (by, at). A second click, a newer attempt of the
// task, an expired record or a user not allowed gets an ephemeral refusal
// and changes nothing. Answer's click only opens the modal (the record
// stays open); its submission is the compare-and-swap. After the swap the
// action runs through the operator's paths (control.Submit with By
// "slack:<user>" for cancel and unpark, as `start task cancel` and
// `start unpark`; an admitted event for the answer and the retry), each
// under an id derived from the record, so that running it again is a
// no-op; the record is marked done, the message updated in place
// (chat.update) to say who did what, without its buttons, and the record
// marked updated by the next tick. A record used
// but not done (the envoy died between the swap and the action) is
// finished by the next tick (never while this process's click is still
// carrying it out): a click is done once, or refused, never twice.

// NSButtons is the store namespace of the button records (in file mode
// state/store/kv/buttons/).
const NSButtons = "buttons"

// Button actions (the action_id of a button, the action of its record).
const (
	ActionAnswer = "answer"
	ActionCancel = "cancel"
	ActionRetry  = "retry"
	ActionUnpark = "unpark"
)

// AnswerCallback is the callback_id of the Answer modal; its one input is
// block AnswerBlock, action AnswerInput.
const (
	AnswerCallback = "kingdom-answer"
	AnswerBlock    = "answer"
	AnswerInput    = "text"
)

// Record states.
const (
	btnOpen   = "open"
	btnUsed   = "used"
	btnClosed = "closed" // the task finished, or a sibling button was used
)

// anyAttempt is the attempt of a button good for every attempt of its
// task: a thread start stands for the whole task (a retry posts none).
const anyAttempt = -1

// button is one button of an outbound post.
type button struct {
	ActionID, Value, Label string
	Style                  slack.Style
	Command                string // the console's equivalent
}

// buttonRecord is one value of NSButtons.
type buttonRecord struct {
	ID         string `json:"id"`
	Action     string `json:"action"`
	TaskID     string `json:"task_id,omitempty"`
	RetryCount int    `json:"retry_count"`      // anyAttempt: any
	Target     string `json:"target,omitempty"` // unpark: the park's key
	MsgID      string `json:"msg_id"`
	Channel    string `json:"channel"`
	ThreadTS   string `json:"thread_ts,omitempty"`
	TS         string `json:"ts,omitempty"` // the message's, once posted
	Text       string `json:"text"`         // the message's text as posted
	// Users may click (the asker, slack.allowed_users); AllowAll: anyone
	// (slack.allow_all).
	Users     []string `json:"users"`
	AllowAll  bool     `json:"allow_all,omitempty"`
	Siblings  []string `json:"siblings,omitempty"` // the other buttons of the message
	CreatedAt string   `json:"created_at"`
	ExpiresAt string   `json:"expires_at"`
	State     string   `json:"state"`
	By        string   `json:"by,omitempty"` // the Slack user who used it
	At        string   `json:"at,omitempty"`
	Reply     string   `json:"reply,omitempty"`    // answer: the submitted text
	ReplyTS   string   `json:"reply_ts,omitempty"` // answer: the reply's synthetic ts
	Done      bool     `json:"done,omitempty"`     // the action ran
	Updated   bool     `json:"updated,omitempty"`  // its message says so
}

// buttonsFor returns the actions m's post carries (in order) and the park
// it would lift.
func buttonsFor(m *doc.Message, t target) (acts []string, park string) {
	key := taskKey(m)
	if p, _ := m.Context["park"].(string); p != "" {
		acts = append(acts, ActionUnpark)
		park = p
	}
	if key == "" {
		return acts, park
	}
	switch {
	case m.Type == doc.MessageHumanInputRequest:
		acts = append(acts, ActionAnswer, ActionCancel)
	case m.Type == doc.MessageThreadStart && !t.noPost:
		acts = append(acts, ActionCancel)
	case m.Type == doc.MessageNotification && m.Final != nil && *m.Final == doc.FinalFailed && !isCancelled(m):
		acts = append(acts, ActionRetry)
	}
	return acts, park
}

var buttonLabel = map[string]string{
	ActionAnswer: "Answer", ActionCancel: "Cancel task", ActionRetry: "Retry", ActionUnpark: "Unpark",
}

// consoleCommand is what does the same as a button, at the machine.
func consoleCommand(act, task, park string) string {
	switch act {
	case ActionAnswer:
		return "envoy reply " + task + " \"<your answer>\""
	case ActionCancel:
		return "start task cancel " + task
	case ActionUnpark:
		return "start unpark " + park
	}
	return "" // no console retry: re-send the source, or use the Slack button
}

// makeButtons writes the records of p's buttons and sets p.Buttons. The
// console prints the commands instead and writes no record.
func (e *Envoy) makeButtons(ctx context.Context, m *doc.Message, t target, p *post) error {
	acts, park := buttonsFor(m, t)
	if len(acts) == 0 {
		return nil
	}
	task := taskKey(m)
	if e.Console() {
		for _, a := range acts {
			if c := consoleCommand(a, task, park); c != "" {
				p.Buttons = append(p.Buttons, button{ActionID: a, Label: buttonLabel[a], Command: c})
			}
		}
		return nil
	}
	now := e.clock.Now()
	cfg := e.config()
	attempt, eventID := e.taskAttempt(task)
	attempt = max(attempt, 0)
	if n, ok := m.Context["retry_count"].(float64); ok {
		attempt = int(n)
	}
	if m.Type == doc.MessageThreadStart {
		attempt = anyAttempt
	}
	if ev, _ := m.Context["event_id"].(string); ev != "" {
		eventID = ev
	}
	users := slices.Clone(cfg.Slack.AllowedUsers)
	if u := e.eventUser(eventID); u != "" && !slices.Contains(users, u) {
		users = append(users, u)
	}
	recs := make([]buttonRecord, len(acts))
	idl := make([]string, len(acts))
	for i := range acts {
		idl[i] = "btn-" + ids.Rand(12)
	}
	for i, a := range acts {
		recs[i] = buttonRecord{ID: idl[i], Action: a, TaskID: task, RetryCount: attempt, MsgID: m.ID,
			Channel: t.channel, ThreadTS: t.threadTS, Text: p.Text, Users: users, AllowAll: cfg.Slack.AllowAll,
			Siblings:  slices.DeleteFunc(slices.Clone(idl), func(s string) bool { return s == idl[i] }),
			CreatedAt: doc.FormatTime(now), ExpiresAt: doc.FormatTime(now.Add(cfg.ButtonTTL())), State: btnOpen}
		if a == ActionUnpark {
			recs[i].Target = park
		}
	}
	if err := e.st.write(ctx, func(tx store.Tx) error {
		for _, r := range recs {
			if err := putButton(tx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("button records of %s: %w", m.ID, err)
	}
	for i, a := range acts {
		b := button{ActionID: a, Value: idl[i], Label: buttonLabel[a], Style: slack.StylePrimary, Command: consoleCommand(a, task, park)}
		if a == ActionCancel {
			b.Style = slack.StyleDanger
		}
		p.Buttons = append(p.Buttons, b)
	}
	return nil
}

// postedButtons records where the message of p's buttons landed (for the
// update that removes them when its task ends). Best effort: a click
// names its message itself.
func (e *Envoy) postedButtons(ctx context.Context, p post, channel, ts string) {
	for _, b := range p.Buttons {
		if b.Value == "" {
			continue
		}
		if _, err := e.swapButton(ctx, b.Value, func(r *buttonRecord) error {
			r.Channel, r.TS = channel, ts
			return nil
		}); err != nil {
			e.log.Warn("button record not updated with its message", "button", b.Value, "err", err)
		}
	}
}

// errNoButton is a button id with no record.
var errNoButton = errors.New("no such button")

// swapButton runs fn on record id in one fenced transaction (the row
// locked: the compare-and-swap); fn's error changes nothing.
func (e *Envoy) swapButton(ctx context.Context, id string, fn func(*buttonRecord) error) (buttonRecord, error) {
	var out buttonRecord
	if ids.Check(id) != nil {
		return out, errNoButton
	}
	err := e.st.write(ctx, func(tx store.Tx) error {
		r, err := lockButton(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errNoButton
		}
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
		out = r
		return putButton(tx, r)
	})
	return out, err
}

// lockButton reads record id in tx, its row locked.
func lockButton(tx store.Tx, id string) (buttonRecord, error) {
	var r buttonRecord
	b, err := tx.ValueForUpdate(NSButtons, id)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("button %s: %w", id, err)
	}
	return r, nil
}

// putButton writes record r in tx.
func putButton(tx store.Tx, r buttonRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Set(NSButtons, r.ID, b)
}

// loadButton reads record id.
func (e *Envoy) loadButton(ctx context.Context, id string) (buttonRecord, error) {
	var r buttonRecord
	if ids.Check(id) != nil {
		return r, errNoButton
	}
	ctx, cancel := context.WithTimeout(ctx, e.st.timeout)
	defer cancel()
	b, err := e.st.st.Value(ctx, NSButtons, id)
	if errors.Is(err, store.ErrNotFound) {
		return r, errNoButton
	}
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// refusal is why user may not use r now ("" = they may). attempt is the
// task's current retry_count (-1: unknown).
func (e *Envoy) refusal(r buttonRecord, user string, attempt int, now time.Time) string {
	switch r.State {
	case btnUsed:
		return fmt.Sprintf("Already done: %s by <@%s> at %s.", strings.ToLower(buttonLabel[r.Action]), r.By, r.At)
	case btnClosed:
		return "This button is closed: its task has moved on."
	}
	if exp, err := doc.ParseTime(r.ExpiresAt); err != nil || !now.Before(exp) {
		return "This button has expired (buttons last `buttons.ttl_hours`)."
	}
	if !r.AllowAll && (user == "" || !slices.Contains(r.Users, user)) {
		return "Sorry, only the person who asked and the people on `slack.allowed_users` can use this button."
	}
	if r.RetryCount != anyAttempt && attempt >= 0 && attempt != r.RetryCount {
		return fmt.Sprintf("This button is for attempt %d of %s; the task is on attempt %d now.", r.RetryCount+1, r.TaskID, attempt+1)
	}
	return ""
}

// refused is a click the record refuses.
type refused struct{ reason string }

func (r refused) Error() string { return r.reason }

// click is one button click, as Slack reports it.
type click struct {
	user, channel, ts, thread string
	value, trigger            string
}

// onInteractive handles an interactive envelope: acked at once, then the
// click or the modal's submission.
func (e *Envoy) onInteractive(ctx context.Context, smc *socketmode.Client, evt socketmode.Event) {
	e.ack(smc, evt)
	cb, ok := evt.Data.(slack.InteractionCallback)
	if !ok {
		return
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		ch, ts := cb.Container.ChannelID, cb.Container.MessageTs
		if ch == "" {
			ch = cb.Channel.ID
		}
		for _, a := range cb.ActionCallback.BlockActions {
			e.onClick(ctx, click{user: cb.User.ID, channel: ch, ts: ts, thread: cb.Container.ThreadTs,
				value: a.Value, trigger: cb.TriggerID})
		}
	case slack.InteractionTypeViewSubmission:
		if cb.View.CallbackID != AnswerCallback {
			return
		}
		var text string
		if cb.View.State != nil {
			text = cb.View.State.Values[AnswerBlock][AnswerInput].Value
		}
		e.onAnswer(ctx, cb.User.ID, cb.View.PrivateMetadata, text)
	}
}

// onClick resolves one click (Answer: opens the modal).
func (e *Envoy) onClick(ctx context.Context, c click) {
	refuse := func(reason string) {
		e.log.Info("button click refused", "button", c.value, "user", c.user, "reason", reason)
		if err := e.poster.Ephemeral(ctx, c.channel, c.thread, c.user, reason); err != nil {
			e.log.Warn("ephemeral refusal not shown", "err", redact(err))
		}
	}
	r, err := e.loadButton(ctx, c.value)
	if errors.Is(err, errNoButton) {
		refuse("This button is no longer known to Kingdom.")
		return
	}
	if err != nil {
		e.log.Error("button record not read", "button", c.value, "err", err)
		refuse("Kingdom could not read this button's record; try again in a moment.")
		return
	}
	if r.TS == "" && c.ts != "" {
		r.Channel, r.TS = c.channel, c.ts
	}
	attempt, _ := e.taskAttempt(r.TaskID)
	if why := e.refusal(r, c.user, attempt, e.clock.Now()); why != "" {
		refuse(why)
		return
	}
	if r.Action == ActionAnswer {
		if _, ok := e.awaited(ctx, r.TaskID); !ok {
			refuse("This question was already answered.")
			return
		}
		// The click opens the modal and changes nothing: the submission
		// uses the button.
		if err := e.poster.OpenAnswer(ctx, c.trigger, r.ID, r.Text); err != nil {
			e.log.Warn("answer modal not opened", "err", redact(err))
		}
		return
	}
	r, err = e.useButton(ctx, r.ID, c.user, "", c.channel, c.ts)
	var ref refused
	if errors.As(err, &ref) {
		refuse(ref.reason)
		return
	}
	if err != nil {
		e.log.Error("button not used", "button", c.value, "err", err)
		refuse("Kingdom could not record this click; nothing was done. Try again in a moment.")
		return
	}
	e.carryOut(ctx, r)
}

// onAnswer resolves an Answer modal's submission.
func (e *Envoy) onAnswer(ctx context.Context, user, id, text string) {
	r, err := e.loadButton(ctx, id)
	if err != nil {
		e.log.Warn("answer of an unknown button dropped", "button", id, "err", err)
		return
	}
	refuse := func(reason string) {
		e.log.Info("answer refused", "button", id, "user", user, "reason", reason)
		if err := e.poster.Ephemeral(ctx, r.Channel, r.ThreadTS, user, reason); err != nil {
			e.log.Warn("ephemeral refusal not shown", "err", redact(err))
		}
	}
	if strings.TrimSpace(text) == "" {
		refuse("An empty answer was not sent.")
		return
	}
	if _, ok := e.awaited(ctx, r.TaskID); !ok && r.State == btnOpen {
		refuse("This question was already answered.")
		return
	}
	r, err = e.useButton(ctx, id, user, text, "", "")
	var ref refused
	if errors.As(err, &ref) {
		refuse(ref.reason)
		return
	}
	if err != nil {
		e.log.Error("answer not recorded", "button", id, "err", err)
		refuse("Kingdom could not record your answer; nothing was sent. Try again in a moment.")
		return
	}
	e.carryOut(ctx, r)
}

// useButton is the compare-and-swap: open → used by user, now (with the
// answer's text), its siblings closed; refused (and nothing changed) when
// refusal says so.
func (e *Envoy) useButton(ctx context.Context, id, user, reply, channel, ts string) (buttonRecord, error) {
	var out buttonRecord
	now := e.clock.Now()
	rec, err := e.loadButton(ctx, id)
	if err != nil {
		return out, err
	}
	attempt, _ := e.taskAttempt(rec.TaskID)
	err = e.st.write(ctx, func(tx store.Tx) error {
		r, err := lockButton(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return refused{"This button is no longer known to Kingdom."}
		}
		if err != nil {
			return err
		}
		if why := e.refusal(r, user, attempt, now); why != "" {
			return refused{why}
		}
		r.State, r.By, r.At = btnUsed, user, doc.FormatTime(now)
		if r.TS == "" && ts != "" {
			r.Channel, r.TS = channel, ts
		}
		if reply != "" {
			us := now.UnixMicro()
			r.Reply, r.ReplyTS = reply, fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
		}
		for _, sib := range r.Siblings {
			s, err := lockButton(tx, sib)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if s.State == btnOpen {
				s.State = btnClosed
				if err := putButton(tx, s); err != nil {
					return err
				}
			}
		}
		out = r
		if err := putButton(tx, r); err != nil {
			return err
		}
		// In the swap's transaction: a click used is in the event log even
		// when the envoy dies before its action.
		actor := "envoy"
		if e.em != nil {
			actor = e.em.Actor()
		}
		return tx.Emit("slack.button", actor, map[string]any{"button": id, "action": r.Action, "task_id": r.TaskID, "by": "slack:" + user})
	})
	return out, err
}

// carrying holds the ids of the buttons whose action a goroutine of this
// process is carrying out: the socket's click and the tick's
// finishButtons must not both run one (each action is idempotent, but
// the message would be updated twice and the work done twice). Button ids
// are random, so envoys of one process (tests) do not meet here.
var carrying sync.Map

// updatedHere holds the ids of the buttons whose message this process
// updated, for the next tick to mark their records updated (outside the
// click's goroutine).
var updatedHere sync.Map

// carryOut runs a used button's action, marks it done and updates its
// message, unless another goroutine is at it or did it meanwhile. An
// action that fails stays not done: the next tick tries it again
// (finishButtons).
func (e *Envoy) carryOut(ctx context.Context, r buttonRecord) {
	if _, busy := carrying.LoadOrStore(r.ID, true); busy {
		return
	}
	defer carrying.Delete(r.ID)
	cur, err := e.loadButton(ctx, r.ID)
	if err != nil {
		e.log.Warn("button record not read; its action is left to the next tick", "button", r.ID, "err", err)
		return
	}
	if cur.State != btnUsed || cur.Done && (cur.Updated || cur.TS == "") {
		return
	}
	r = cur
	if !r.Done {
		if err := e.act(ctx, r); err != nil {
			e.log.Error("button action not carried out; retried next tick", "button", r.ID, "action", r.Action, "err", err)
			return
		}
		if _, err := e.swapButton(ctx, r.ID, func(x *buttonRecord) error {
			x.Done = true
			return nil
		}); err != nil {
			e.log.Warn("button not marked done", "button", r.ID, "err", err)
			return
		}
	}
	if r.TS == "" {
		return
	}
	// The text is the posted one (already escaped); the line is ours. The
	// next tick marks the record updated; an envoy that dies before
	// updates the message again (the same text) after its relaunch, never
	// leaves it with its buttons.
	if err := e.poster.Update(ctx, r.Channel, r.TS, strings.TrimRight(r.Text, "\n")+"\n"+didLine(r)); err != nil {
		e.log.Warn("message not updated after a button", "button", r.ID, "err", redact(err))
	}
	updatedHere.Store(r.ID, true)
}

// didLine says who did what, under the message.
func didLine(r buttonRecord) string {
	who := "<@" + EscapeText(r.By) + ">"
	switch r.Action {
	case ActionAnswer:
		var t slackText
		return "✍️ Answered by " + who + ": " + t.data(clipRunes(r.Reply, 500)).String()
	case ActionCancel:
		return "⛔ Cancel task requested by " + who
	case ActionRetry:
		return "🔁 Retry requested by " + who
	case ActionUnpark:
		return "▶️ Unpark requested by " + who
	}
	return r.Action + " by " + who
}

// act runs r's action. Each is idempotent under the record's id: a
// second run (after a crash) does nothing more.
func (e *Envoy) act(ctx context.Context, r buttonRecord) error {
	by := "slack:" + r.By
	switch r.Action {
	case ActionCancel:
		return e.submitControl(ctx, control.Request{ID: "ctl-" + r.ID, Action: control.ActionCancel, TaskID: r.TaskID, By: by})
	case ActionUnpark:
		return e.submitControl(ctx, control.Request{ID: "ctl-" + r.ID, Action: control.ActionUnpark, Target: r.Target, By: by})
	case ActionRetry:
		return e.retrigger(ctx, r)
	case ActionAnswer:
		a, ok := e.awaited(ctx, r.TaskID)
		if !ok {
			// Answered meanwhile (a thread reply, or this answer before a
			// crash): the reply event exists or the task moved on.
			return nil
		}
		f, err := e.handleInbound(ctx, Inbound{Kind: "message", Channel: a.Channel, User: r.By, Text: r.Reply,
			TS: r.ReplyTS, ThreadTS: a.ThreadTS, Button: true})
		if err != nil {
			return err
		}
		e.doFollowUp(ctx, f)
		return nil
	}
	return fmt.Errorf("unknown button action %q", r.Action)
}

// submitControl queues an operator request once: a request or reply
// already under its id means an earlier run queued it.
func (e *Envoy) submitControl(ctx context.Context, req control.Request) error {
	ctx, cancel := context.WithTimeout(ctx, e.st.timeout)
	defer cancel()
	s := kv.OnStore(e.st.st)
	for _, ns := range []string{kv.NSControl, kv.NSReplies} {
		if _, err := s.Get(ctx, ns, req.ID); err == nil {
			return nil
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
	}
	_, err := control.Submit(ctx, s, req, e.clock.Now())
	return err
}

// retrigger re-runs a failed task: its source event admitted again under
// a new id (evt-retry-<button>), with retry_of naming the task. The king
// routes it as any event (the breaker's per-item cap counts it).
func (e *Envoy) retrigger(ctx context.Context, r buttonRecord) error {
	id := "evt-retry-" + r.ID
	if e.admit.Known(id) {
		return nil
	}
	var t doc.Task
	if st, ok := e.tasks.Find(r.TaskID); !ok {
		return fmt.Errorf("retry %s: task not found", r.TaskID)
	} else if err := e.tasks.ReadJSON(st, r.TaskID, &t); err != nil {
		return fmt.Errorf("retry %s: %w", r.TaskID, err)
	}
	var src doc.Event
	if st, ok := e.events.Find(t.EventID); !ok {
		return fmt.Errorf("retry %s: source event %s not found", r.TaskID, t.EventID)
	} else if err := e.events.ReadJSON(st, t.EventID, &src); err != nil {
		return fmt.Errorf("retry %s: %w", r.TaskID, err)
	}
	ev := src
	ev.ID, ev.Status, ev.TaskID = id, doc.EventPending, ""
	ev.CreatedAt = doc.FormatTime(e.clock.Now())
	ev.Priority = doc.PriorityHigh
	ev.Payload = maps.Clone(src.Payload)
	if ev.Payload == nil {
		ev.Payload = map[string]any{}
	}
	ev.Payload["retry_of"] = r.TaskID
	ev.Payload["retried_by"] = "slack:" + r.By
	if err := e.admit.Admit(id, ev); err != nil && !errors.Is(err, queue.ErrDuplicate) {
		return fmt.Errorf("retry %s: %w", r.TaskID, err)
	}
	e.em.Emit("event.detected", map[string]any{"event_id": id, "event_type": ev.Type, "source": ev.Source,
		"priority": ev.Priority, "retry_of": r.TaskID, "by": "slack:" + r.By})
	return nil
}

// awaited is the question task is waiting on, if it still waits.
func (e *Envoy) awaited(ctx context.Context, task string) (Awaited, bool) {
	var a Awaited
	var ok bool
	if err := e.st.view(ctx, func(s *State) { a, ok = s.Awaiting[task] }); err != nil {
		return a, false
	}
	return a, ok
}

// taskAttempt returns task's retry_count now and its source event (-1, ""
// when the task is not found; 0, "" when it cannot be read).
func (e *Envoy) taskAttempt(task string) (int, string) {
	if task == "" {
		return -1, ""
	}
	st, ok := e.tasks.Find(task)
	if !ok {
		return -1, ""
	}
	var t doc.Task
	if e.tasks.ReadJSON(st, task, &t) != nil {
		return 0, ""
	}
	return t.RetryCount, t.EventID
}

// eventUser is the Slack user whose message made event id ("" if none).
func (e *Envoy) eventUser(id string) string {
	if id == "" || ids.Check(id) != nil {
		return ""
	}
	st, ok := e.events.Find(id)
	if !ok {
		return ""
	}
	var ev doc.Event
	if e.events.ReadJSON(st, id, &ev) != nil {
		return ""
	}
	u, _ := ev.Payload["user_id"].(string)
	return u
}

// closeTaskButtons closes the open buttons of a task whose final
// notification landed and updates their messages in place without them
// (the thread start loses Cancel task). A ❌'s Retry stays.
func (e *Envoy) closeTaskButtons(ctx context.Context, task, finalMsg string) {
	c, cancel := context.WithTimeout(ctx, e.st.timeout)
	vals, err := e.st.st.Values(c, NSButtons)
	cancel()
	if err != nil {
		e.log.Warn("buttons not closed", "task_id", task, "err", err)
		return
	}
	updated := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		var r buttonRecord
		if json.Unmarshal(vals[k], &r) != nil || r.TaskID != task || r.State != btnOpen || r.MsgID == finalMsg {
			continue
		}
		closed, err := e.swapButton(ctx, r.ID, func(x *buttonRecord) error {
			if x.State != btnOpen {
				return refused{"not open"}
			}
			x.State = btnClosed
			return nil
		})
		if err != nil || closed.TS == "" || updated[closed.TS] {
			continue
		}
		updated[closed.TS] = true
		if err := e.poster.Update(ctx, closed.Channel, closed.TS, closed.Text); err != nil {
			e.log.Warn("message not updated without its buttons", "msg_id", closed.MsgID, "err", redact(err))
		}
	}
}

// finishButtons carries out the buttons used but not done (the envoy died
// between the swap and the action), updates the messages of those done
// but not yet updated (it died before the update), and forgets records a
// day past their expiry.
func (e *Envoy) finishButtons(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, e.st.timeout)
	vals, err := e.st.st.Values(c, NSButtons)
	cancel()
	if err != nil {
		return fmt.Errorf("read button records: %w", err)
	}
	now := e.clock.Now()
	var stale []string
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		var r buttonRecord
		if json.Unmarshal(vals[k], &r) != nil {
			continue
		}
		if _, ok := updatedHere.Load(r.ID); ok && r.Updated {
			updatedHere.Delete(r.ID)
		} else if ok && r.Done {
			if _, err := e.swapButton(ctx, r.ID, func(x *buttonRecord) error {
				x.Updated = true
				return nil
			}); err != nil {
				e.log.Warn("button not marked updated", "button", r.ID, "err", err)
				continue
			}
			updatedHere.Delete(r.ID)
			continue
		}
		if r.State == btnUsed && (!r.Done || !r.Updated && r.TS != "") {
			e.carryOut(ctx, r)
			continue
		}
		if exp, err := doc.ParseTime(r.ExpiresAt); err == nil && now.Sub(exp) > 24*time.Hour && (r.Done || r.State != btnUsed) {
			stale = append(stale, k)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return e.st.write(ctx, func(tx store.Tx) error {
		for _, k := range stale {
			if err := tx.Delete(NSButtons, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// buttonBlocks is a message's Block Kit: its text, then its buttons.
func buttonBlocks(text string, bs []button) []slack.Block {
	els := make([]slack.BlockElement, 0, len(bs))
	for _, b := range bs {
		el := slack.NewButtonBlockElement(b.ActionID, b.Value, slack.NewTextBlockObject(slack.PlainTextType, b.Label, true, false))
		if b.Style != "" {
			el = el.WithStyle(b.Style)
		}
		els = append(els, el)
	}
	return []slack.Block{textBlock(text), slack.NewActionBlock("kingdom-buttons", els...)}
}

// textBlock is a section holding text (a section takes 3000 characters;
// the message's text field keeps all of it).
func textBlock(text string) slack.Block {
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clipRunes(text, 3000), false, false), nil, nil)
}

// answerModal is the Answer modal: the question and one text input.
func answerModal(buttonID, question string) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(slack.NewTextBlockObject(slack.PlainTextType, "Your answer", false, false), AnswerInput).
		WithMultiline(true)
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: AnswerCallback, PrivateMetadata: buttonID,
		Title:  slack.NewTextBlockObject(slack.PlainTextType, "Answer", false, false),
		Submit: slack.NewTextBlockObject(slack.PlainTextType, "Send", false, false),
		Close:  slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			textBlock(question),
			slack.NewInputBlock(AnswerBlock, slack.NewTextBlockObject(slack.PlainTextType, "Answer", false, false), nil, input),
		}},
	}
}

// clipRunes cuts s to at most n runes, marking the cut.
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
