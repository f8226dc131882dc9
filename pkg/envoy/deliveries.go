package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Exactly once across failover (PostgreSQL mode, SPEC §11.7). The envoy
// leads on one host at a time, under a store lease; the host may die at
// any point of a send and another take over. So every step that matters
// is a record in the shared store (kv NSDeliveries, key = message id),
// written in a transaction fenced by the lease (a deposed envoy's late
// write fails with store.ErrFenced):
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
// The rule for it is at most once: the envoy looks for the message in
// Slack (conversations.replies of its thread, or conversations.history of
// the channel for a top-level post: a message of our bot with the same
// text, posted since the record was started, a minute's clock skew
// allowed). Found: its ts is recorded and the message finished without a
// post. Not found: it is posted (the earlier post never reached Slack).
// When Slack cannot be asked (console mode; Slack refuses the look-up,
// e.g. a missing history scope) the message is finished as sent with
// slack.delivery "unknown" and a warning: a lost line is preferred to a
// second ✅. A look-up that fails for a moment (network, rate limit) keeps
// the message pending for the next tick.

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

// storeJournal keeps the delivery records in the store (the journal of
// PostgreSQL mode). The store (state.go) calls it with its mutex held.
type storeJournal struct {
	st    store.Store
	host  string
	clock clock.Clock
	log   *slog.Logger
	lease store.Lease // nil until UseLease: writes are then unfenced

	started map[string]string         // message id → started_at of this term's begin
	doubt   map[string]deliveryRecord // posts an earlier leader began and never recorded
	settled map[string]bool           // records the next commit deletes
}

func newStoreJournal(st store.Store, host string, c clock.Clock, log *slog.Logger) *storeJournal {
	return &storeJournal{st: st, host: host, clock: c, log: log,
		started: map[string]string{}, doubt: map[string]deliveryRecord{}, settled: map[string]bool{}}
}

// update runs fn in one store transaction fenced by the lease.
func (j *storeJournal) update(fn func(store.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), queue.StoreTimeout)
	defer cancel()
	return j.st.Update(ctx, func(tx store.Tx) error {
		if j.lease != nil {
			tx.Fence(j.lease)
		}
		return fn(tx)
	})
}

func (j *storeJournal) epoch() int64 {
	if j.lease == nil {
		return 0
	}
	return j.lease.Epoch()
}

func (j *storeJournal) put(id string, r deliveryRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return j.update(func(tx store.Tx) error { return tx.Set(store.NSDeliveries, id, b) })
}

// reserve: the store has no disk of ours to fill.
func (j *storeJournal) reserve(int) error { return nil }

func (j *storeJournal) begin(id string) error {
	now := schema.FormatTime(j.clock.Now())
	if err := j.put(id, deliveryRecord{Host: j.host, Epoch: j.epoch(), StartedAt: now, State: recPosting}); err != nil {
		return fmt.Errorf("record start of delivery %s: %w", id, err)
	}
	j.started[id] = now
	return nil
}

func (j *storeJournal) record(id string, d Delivery) error {
	started := j.started[id]
	if started == "" {
		started = d.At
	}
	if err := j.put(id, deliveryRecord{Host: j.host, Epoch: j.epoch(), StartedAt: started, State: recRecorded, Delivery: d}); err != nil {
		return fmt.Errorf("record delivery %s: %w", id, err)
	}
	delete(j.started, id)
	delete(j.doubt, id)
	j.settled[id] = true // the documents hold it after the next commit
	return nil
}

// read returns the recorded deliveries, oldest first, and keeps the posts
// in doubt for deliver.
func (j *storeJournal) read() ([]journalEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), queue.StoreTimeout)
	defer cancel()
	vals, err := j.st.Values(ctx, store.NSDeliveries)
	if err != nil {
		return nil, fmt.Errorf("read delivery records: %w", err)
	}
	clear(j.doubt)
	var out []journalEntry
	for id, b := range vals {
		var r deliveryRecord
		if err := json.Unmarshal(b, &r); err != nil {
			// Unreadable: what it said is unknown, so it is a post in doubt.
			j.log.Warn("delivery record unreadable; its message is looked for in Slack before any post", "msg_id", id, "err", err)
			j.doubt[id] = deliveryRecord{}
			continue
		}
		if r.State == recRecorded {
			out = append(out, journalEntry{ID: id, D: r.Delivery})
			j.settled[id] = true
			continue
		}
		j.doubt[id] = r
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].D.At != out[b].D.At {
			return out[a].D.At < out[b].D.At
		}
		return out[a].ID < out[b].ID
	})
	return out, nil
}

func (j *storeJournal) settle(id string) bool {
	delete(j.started, id)
	delete(j.doubt, id)
	j.settled[id] = true
	return true
}

// commit writes the documents (the values kv.OnStore keeps: namespace
// kv.NSEnvoy) and deletes the settled records in one fenced transaction.
func (j *storeJournal) commit(vs map[string][]byte) error {
	if len(vs) == 0 && len(j.settled) == 0 {
		return nil
	}
	err := j.update(func(tx store.Tx) error {
		for k, v := range vs {
			if err := tx.Set(kv.NSEnvoy, k, v); err != nil {
				return err
			}
		}
		for id := range j.settled {
			if err := tx.Delete(store.NSDeliveries, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write envoy state: %w", err)
	}
	clear(j.settled)
	return nil
}

// UseLease is called by the runner once the envoy's lease is taken
// (PostgreSQL mode): every record, message move and document write of
// this term is fenced by it, and the state is read afresh from the store,
// where the previous leader left it.
func (e *Envoy) UseLease(l store.Lease) {
	e.mu.Lock()
	e.lease = l
	e.mu.Unlock()
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	if sj, ok := e.st.j.(*storeJournal); ok {
		sj.lease = l
	}
	e.st.cached, e.st.raw, e.st.dirty = nil, nil, false
}

// currentLease is the lease of this term (nil in file mode).
func (e *Envoy) currentLease() store.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease
}

// inDoubt returns the record of a post of message id an earlier leader
// began and never recorded.
func (st *stateStore) inDoubt(id string) (deliveryRecord, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sj, ok := st.j.(*storeJournal)
	if !ok {
		return deliveryRecord{}, false
	}
	r, ok := sj.doubt[id]
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

// settleDoubt applies the rule for a post an earlier leader began (see the
// top of this file) to message m bound for t.
func (e *Envoy) settleDoubt(ctx context.Context, m *schema.Message, t target) (doubtOutcome, string, error) {
	r, ok := e.st.inDoubt(m.ID)
	if !ok {
		return doubtPost, "", nil
	}
	var since time.Time
	if st, err := parseTime(r.StartedAt); err == nil {
		since = st.Add(-findSkew)
	}
	ts, err := e.poster.Find(ctx, t.channel, t.threadTS, text(m), since)
	var se slack.SlackErrorResponse
	switch {
	case errors.Is(err, errFindUnsupported) || errors.As(err, &se):
		e.log.Warn("a previous envoy may have posted this message; Slack cannot tell: finished as sent, delivery unknown",
			"msg_id", m.ID, "began_on", r.Host, "epoch", r.Epoch, "err", redact(err))
		return doubtUnknown, "", nil
	case err != nil:
		return doubtPost, "", fmt.Errorf("look for message %s in Slack: %w", m.ID, err)
	case ts != "":
		e.log.Info("found in Slack, posted by a previous envoy: not posted again", "msg_id", m.ID, "ts", ts,
			"began_on", r.Host, "epoch", r.Epoch)
		return doubtFound, ts, nil
	}
	e.log.Info("a previous envoy's post never reached Slack: posting", "msg_id", m.ID, "began_on", r.Host, "epoch", r.Epoch)
	return doubtPost, "", nil
}

// Find looks in Slack for a message of our bot with exactly text in
// channel (in thread threadTS when set, else among the channel's top-level
// messages) posted since since (zero: any time); "" when there is none.
func (w *webPoster) Find(ctx context.Context, channel, threadTS, text string, since time.Time) (string, error) {
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
			if ours && m.Text == text {
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

// identity is our bot's user and bot id (auth.test, asked once).
func (w *webPoster) identity(ctx context.Context) (user, bot string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.user != "" || w.bot != "" {
		return w.user, w.bot, nil
	}
	resp, err := w.api.AuthTestContext(ctx)
	if err != nil {
		return "", "", err
	}
	w.user, w.bot = resp.UserID, resp.BotID
	return w.user, w.bot, nil
}

// Find: the console keeps no history to look in.
func (c *consolePoster) Find(context.Context, string, string, string, time.Time) (string, error) {
	return "", errFindUnsupported
}
