package envoy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// The one delivery protocol (SPEC §12.1: a record before the post, a
// look-up before any repost), the same in both modes. The envoy leads on
// one host at a time, under the store's lease; it may die at any point of
// a send, and the next leader (another host, or the same one restarted)
// take over. So every step that matters is a record in the store (kv
// NSDeliveries, key = message id; in file mode a file under
// state/store/kv/deliveries/), written in a transaction fenced by the lease
// (a deposed envoy's late write fails with store.ErrFenced):
//
//  1. before the post: {host, epoch, started_at, state: "posting"};
//  2. after the post: the same with state "recorded" and the delivery
//     (channel, Slack ts, thread);
//  3. the message moves to sent/ (or failed/), fenced too;
//  4. at the end of the tick the envoy's documents (mappings, awaited
//     questions…) are written and the settled records deleted, in one
//     fenced transaction.
//
// A new leader loads the documents and the records left. A "recorded"
// record is a post Slack accepted: the message is finished (or, already in
// sent/, its bookkeeping applied again) and never posted again. A
// "posting" record with no ts is a leader that died mid-post: Slack may or
// may not have the message, and chat.postMessage has no idempotency key.
// The rule for it is at most once: the envoy looks for the message (in
// Slack: conversations.replies of its thread, or conversations.history of
// the channel for a top-level post, a message of our bot with the same
// text posted since the record was started, a minute's clock skew allowed;
// on the console: its line in this host's console log). Found: its ts is
// recorded and the message finished without a post. Not found: it is
// posted (the earlier post never left). When it cannot be looked for
// (Slack refuses the look-up, e.g. a missing history scope; another host's
// console) the message is finished as sent with slack.delivery "unknown"
// and a warning: a lost line is preferred to a second ✅. A look-up that
// fails for a moment (network, rate limit) keeps the message pending for
// the next tick.

// Record states.
const (
	recPosting  = "posting"
	recRecorded = "recorded"
)

// deliveryRecord is one value of kv NSDeliveries.
type deliveryRecord struct {
	Host      string `json:"host"`
	Epoch     int64  `json:"epoch"`
	StartedAt string `json:"started_at"`
	State     string `json:"state"`
	Delivery
}

// recorded is a delivery a record holds.
type recorded struct {
	ID string
	D  Delivery
}

// write runs fn in one store transaction fenced by the lease.
func (st *stateStore) write(ctx context.Context, fn func(store.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	return st.st.Update(ctx, func(tx store.Tx) error {
		if st.lease != nil {
			tx.Fence(st.lease)
		}
		return fn(tx)
	})
}

// putRecord writes the record of message id in state.
func (st *stateStore) putRecord(ctx context.Context, id, state string, d Delivery) error {
	started := st.started[id]
	if started == "" {
		started = doc.FormatTime(st.clock.Now())
	}
	var epoch int64
	if st.lease != nil {
		epoch = st.lease.Epoch()
	}
	b, err := json.Marshal(deliveryRecord{Host: st.host, Epoch: epoch, StartedAt: started, State: state, Delivery: d})
	if err != nil {
		return err
	}
	if err := st.write(ctx, func(tx store.Tx) error { return tx.Set(store.NSDeliveries, id, b) }); err != nil {
		return err
	}
	st.started[id] = started
	return nil
}

// begin records, durably, that message id is about to be posted.
func (st *stateStore) begin(ctx context.Context, id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, _, err := st.current(ctx); err != nil {
		return err
	}
	delete(st.started, id)
	if err := st.putRecord(ctx, id, recPosting, Delivery{}); err != nil {
		return fmt.Errorf("record start of delivery %s: %w", id, err)
	}
	return nil
}

// readRecords returns the recorded deliveries, oldest first, and keeps the
// posts in doubt for deliver.
func (st *stateStore) readRecords(ctx context.Context) ([]recorded, error) {
	vals, err := st.st.Values(ctx, store.NSDeliveries)
	if err != nil {
		return nil, fmt.Errorf("read delivery records: %w", err)
	}
	clear(st.doubt)
	var out []recorded
	for id, b := range vals {
		var r deliveryRecord
		if err := json.Unmarshal(b, &r); err != nil {
			// Unreadable: what it said is unknown, so it is a post in doubt.
			st.log.Warn("delivery record unreadable; its message is looked for before any post", "msg_id", id, "err", err)
			st.doubt[id] = deliveryRecord{}
			continue
		}
		if r.State == recRecorded {
			out = append(out, recorded{ID: id, D: r.Delivery})
			st.settled[id] = true
			continue
		}
		st.doubt[id] = r
	}
	slices.SortFunc(out, func(a, b recorded) int {
		return cmp.Or(cmp.Compare(a.D.At, b.D.At), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// commit writes the documents vs (kv.NSEnvoy) and deletes the settled
// records in one fenced transaction.
func (st *stateStore) commit(ctx context.Context, vs map[string][]byte) error {
	if len(vs) == 0 && len(st.settled) == 0 {
		return nil
	}
	err := st.write(ctx, func(tx store.Tx) error {
		for k, v := range vs {
			if err := tx.Set(kv.NSEnvoy, k, v); err != nil {
				return err
			}
		}
		for id := range st.settled {
			if err := tx.Delete(store.NSDeliveries, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write envoy state: %w", err)
	}
	clear(st.settled)
	return nil
}

// replay re-applies the bookkeeping of deliveries a previous run recorded
// but did not write to the documents, for messages already in sent/
// (those still pending are finished by deliver, which finds their
// delivery). It runs when the state is loaded, before anyone reads it (the
// tick, the socket, `envoy reply` without a running envoy). Reactions were
// added before the message left pending/.
func (e *Envoy) replay(s *State, entries []recorded) {
	for _, r := range entries {
		b, err := e.messages.Read(layout.Sent, r.ID)
		if err != nil {
			continue // still pending (deliver finishes it) or gone
		}
		delete(s.Deliveries, r.ID) // in sent/: its delivery is needed no more
		m, err := schema.DecodeMessage(b)
		if err != nil {
			continue
		}
		e.bookkeep(m, r.D, s)
	}
}

// settleGone settles the records in doubt whose message has left pending/
// (a crash after its finish, before the records were deleted): no post
// will look them up.
func (st *stateStore) settleGone(pending func(id string) bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := range st.doubt {
		if !pending(id) {
			delete(st.doubt, id)
			st.settled[id] = true
			st.dirty = true
		}
	}
}

// UseLease is called by the runner once the envoy's lease is taken: every
// record, message move and document write of this term is fenced by it,
// and the state is read afresh from the store, where the previous leader
// left it.
func (e *Envoy) UseLease(l store.Lease) {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	e.st.lease = l
	e.st.cached, e.st.raw, e.st.dirty = nil, nil, false
}

// currentLease is the lease of this term (nil before UseLease).
func (e *Envoy) currentLease() store.Lease {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	return e.st.lease
}

// inDoubt returns the record of a post of message id an earlier run began
// and never recorded.
func (st *stateStore) inDoubt(id string) (deliveryRecord, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.doubt[id]
	return r, ok
}

// errFindUnsupported: the poster cannot look for a posted message.
var errFindUnsupported = errors.New("cannot look messages up")

// findSkew is the clock skew allowed between a record's started_at and
// Slack's ts.
const findSkew = time.Minute

// doubtOutcome is what the look-up for a post in doubt decided.
type doubtOutcome int

const (
	doubtPost    doubtOutcome = iota // not in Slack: post it
	doubtFound                       // in Slack: record its ts, do not post
	doubtUnknown                     // cannot tell: finish as sent, unknown
)

// settleDoubt applies the rule for a post an earlier run began (see the
// top of this file) to message m, posted as p.
func (e *Envoy) settleDoubt(ctx context.Context, m *doc.Message, p post) (doubtOutcome, string, error) {
	r, ok := e.st.inDoubt(m.ID)
	if !ok {
		return doubtPost, "", nil
	}
	var since time.Time
	if st, err := doc.ParseTime(r.StartedAt); err == nil {
		since = st.Add(-findSkew)
	}
	ts, err := "", errFindUnsupported
	if !e.Console() || r.Host == e.st.host { // a console log holds only its own host's posts
		ts, err = e.poster.Find(ctx, p, since)
	}
	var se slack.SlackErrorResponse
	switch {
	case errors.Is(err, errFindUnsupported) || errors.As(err, &se):
		e.log.Warn("a previous envoy may have posted this message and it cannot be looked for: finished as sent, delivery unknown",
			"msg_id", m.ID, "began_on", r.Host, "epoch", r.Epoch, "err", redact(err))
		return doubtUnknown, "", nil
	case err != nil:
		return doubtPost, "", fmt.Errorf("look for message %s: %w", m.ID, err)
	case ts != "":
		e.log.Info("found, posted by a previous envoy: not posted again", "msg_id", m.ID, "ts", ts,
			"began_on", r.Host, "epoch", r.Epoch)
		return doubtFound, ts, nil
	}
	e.log.Info("a previous envoy's post never left: posting", "msg_id", m.ID, "began_on", r.Host, "epoch", r.Epoch)
	return doubtPost, "", nil
}

// Find looks in Slack for a message of our bot with exactly p's text in
// p's channel (in its thread when set, else among the channel's top-level
// messages) posted since since (zero: any time); "" when there is none.
func (w *webPoster) Find(ctx context.Context, p post, since time.Time) (string, error) {
	channel, threadTS := p.Channel, p.ThreadTS
	user, bot, err := w.identity(ctx)
	if err != nil {
		return "", err
	}
	oldest := ""
	if !since.IsZero() {
		oldest = strconv.FormatInt(since.Unix(), 10) + ".000000"
	}
	cursor := ""
	for range findPages {
		var msgs []slack.Message
		more := false
		if threadTS != "" {
			msgs, more, cursor, err = w.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: threadTS, Oldest: oldest, Cursor: cursor, Limit: 200})
		} else {
			var resp *slack.GetConversationHistoryResponse
			resp, err = w.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: channel, Oldest: oldest, Cursor: cursor, Limit: 200})
			if resp != nil {
				msgs, more, cursor = resp.Messages, resp.HasMore, resp.ResponseMetaData.NextCursor
			}
		}
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			ours := (bot != "" && m.BotID == bot) || (user != "" && m.User == user)
			if ours && m.Text == p.Text {
				return m.Timestamp, nil
			}
		}
		if !more || cursor == "" {
			return "", nil
		}
	}
	return "", fmt.Errorf("look for a message in %s: more than %d pages", channel, findPages)
}

// findPages bounds a look-up (200 messages a page).
const findPages = 10

// identity is our bot's user and bot id (auth.test, asked until it answers).
func (w *webPoster) identity(ctx context.Context) (user, bot string, err error) {
	if user, bot = w.self(); user != "" || bot != "" {
		return user, bot, nil
	}
	resp, err := w.api.AuthTestContext(ctx)
	if err != nil {
		return "", "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.user, w.bot = resp.UserID, resp.BotID
	return w.user, w.bot, nil
}

// self is our identity as far as known.
func (w *webPoster) self() (user, bot string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.user, w.bot
}

// Find looks for p's record in the console log (its head names the message
// id and the ts it was given); "" when there is none.
func (c *consolePoster) Find(_ context.Context, p post, _ time.Time) (string, error) {
	f, err := os.Open(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	mark := "(" + p.MsgID + ", ts "
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		// A text line is data, indented: never a head.
		if _, after, ok := strings.Cut(line, mark); ok && !strings.HasPrefix(line, " ") {
			if ts, _, ok := strings.Cut(after, ")"); ok {
				return ts, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
	}
}
