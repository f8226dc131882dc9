package envoy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// ThreadMapping is one entry of state/envoy/thread-mappings.json, keyed by
// task id: the Slack thread that task reports into.
type ThreadMapping struct {
	Channel   string         `json:"channel"`
	ThreadTS  string         `json:"thread_ts"`
	SourceRef *doc.SourceRef `json:"source_ref,omitempty"`
	CreatedAt string         `json:"created_at"`
}

// Awaited is one entry of state/envoy/awaiting-responses.json, keyed by
// task id: a question posted in a thread whose first accepted reply resumes
// the task.
type Awaited struct {
	TaskID       string            `json:"task_id"`
	Channel      string            `json:"channel"`
	ThreadTS     string            `json:"thread_ts"`
	ReplyContext *doc.ReplyContext `json:"reply_context"`
	MsgID        string            `json:"msg_id"`
	CreatedAt    string            `json:"created_at"`
}

// Conversation is one entry of state/envoy/conversation-threads.json, keyed
// by "<channel>/<thread_ts>": a thread whose replies are routed back to a
// general until ExpiresAt.
type Conversation struct {
	Channel      string            `json:"channel"`
	ThreadTS     string            `json:"thread_ts"`
	ReplyContext *doc.ReplyContext `json:"reply_context"`
	ExpiresAt    string            `json:"expires_at"`
	// UserID: only this user's follow-ups continue it ("" = any allowed user).
	UserID string `json:"user_id,omitempty"`
}

// Delivery is one entry of state/envoy/deliveries.json, keyed by message
// id: a message Slack accepted whose file is not yet in sent/. It lets a
// restarted envoy finish the bookkeeping without posting twice.
type Delivery struct {
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts,omitempty"`
	At       string `json:"at"`
}

// State is everything the envoy remembers between restarts.
type State struct {
	Mappings      map[string]ThreadMapping `json:"-"`
	Awaiting      map[string]Awaited       `json:"-"`
	Conversations map[string]Conversation  `json:"-"`
	Deliveries    map[string]Delivery      `json:"-"`
}

func convKey(channel, threadTS string) string { return channel + "/" + threadTS }

// awaitedByThread returns the awaited entry for a thread.
func (s *State) awaitedByThread(channel, threadTS string) (Awaited, bool) {
	for _, a := range s.Awaiting {
		if a.Channel == channel && a.ThreadTS == threadTS {
			return a, true
		}
	}
	return Awaited{}, false
}

// liveConversation returns the conversation of a thread unless it expired.
func (s *State) liveConversation(channel, threadTS string, now time.Time) (Conversation, bool) {
	c, ok := s.Conversations[convKey(channel, threadTS)]
	if !ok {
		return c, false
	}
	if t, err := doc.ParseTime(c.ExpiresAt); err != nil || !now.Before(t) {
		return c, false
	}
	return c, true
}

// stateStore loads and saves State. Every change happens under one mutex,
// so the socket goroutine and the tick never lose each other's updates.
//
// Only the envoy (its single leader) writes the documents (kv.NSEnvoy in
// the store: in file mode the files under state/envoy/), so they are read
// once and then kept in memory. The truth in the store is the documents
// plus the delivery records (deliveries.go): a delivery is recorded at
// once and the documents are written at the end of the tick; any other
// change (update) is written at once, each document whose content changed,
// in one transaction.
type stateStore struct {
	mu      sync.Mutex
	st      store.Store
	host    string
	clock   clock.Clock
	log     *slog.Logger
	timeout time.Duration // bounds each store call
	lease   store.Lease   // nil until UseLease: writes are then unfenced
	files   []stateFile

	cached *State
	raw    [][]byte // each document's bytes as last read or written
	dirty  bool     // memory is ahead of the documents
	// replay applies the bookkeeping of recorded deliveries at load.
	replay func(*State, []recorded)

	started map[string]string         // message id → started_at of this term's begin
	doubt   map[string]deliveryRecord // posts an earlier run began and never recorded
	settled map[string]bool           // records the next commit deletes
}

// stateFile is one document: its key in kv.NSEnvoy (in file mode its file
// name under state/envoy/) and the part of State it holds.
type stateFile struct {
	key string
	get func(*State) any
}

func newState(st store.Store, host string, c clock.Clock, log *slog.Logger, timeout time.Duration) *stateStore {
	return &stateStore{st: st, host: host, clock: c, log: log, timeout: timeout,
		started: map[string]string{}, doubt: map[string]deliveryRecord{}, settled: map[string]bool{},
		files: []stateFile{
			{kv.KeyMappings, func(s *State) any { return &s.Mappings }},
			{kv.KeyAwaiting, func(s *State) any { return &s.Awaiting }},
			{kv.KeyConversations, func(s *State) any { return &s.Conversations }},
			{kv.KeyDeliveries, func(s *State) any { return &s.Deliveries }},
		}}
}

func (st *stateStore) load(ctx context.Context) (*State, [][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	s := &State{}
	raw := make([][]byte, len(st.files))
	for i, f := range st.files {
		b, err := st.st.Value(ctx, kv.NSEnvoy, f.key)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("load envoy %s: %w", f.key, err)
		}
		if err := json.Unmarshal(b, f.get(s)); err != nil {
			// A corrupt document must not stop the envoy forever: keep it
			// aside for the operator and start that part afresh.
			aside := fmt.Sprintf("%s.corrupt-%d", f.key, st.clock.Now().Unix())
			if merr := st.write(ctx, func(tx store.Tx) error {
				if err := tx.Set(kv.NSEnvoy, aside, b); err != nil {
					return err
				}
				return tx.Delete(kv.NSEnvoy, f.key)
			}); merr != nil {
				return nil, nil, fmt.Errorf("load envoy %s: %w", f.key, merr)
			}
			st.log.Error("corrupt envoy state moved aside", "key", f.key, "moved_to", aside, "err", err)
			continue
		}
		raw[i] = b
	}
	if s.Mappings == nil {
		s.Mappings = map[string]ThreadMapping{}
	}
	if s.Awaiting == nil {
		s.Awaiting = map[string]Awaited{}
	}
	if s.Conversations == nil {
		s.Conversations = map[string]Conversation{}
	}
	if s.Deliveries == nil {
		s.Deliveries = map[string]Delivery{}
	}
	entries, err := st.readRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range entries {
		s.Deliveries[r.ID] = r.D
	}
	if len(entries) > 0 && st.replay != nil {
		st.replay(s, entries)
		st.dirty = true // the documents lag the records: written at the next flush
	}
	return s, raw, nil
}

// view runs fn on the current state.
func (st *stateStore) view(ctx context.Context, fn func(*State)) error {
	return st.mutate(ctx, func(s *State) bool {
		fn(s)
		return false
	})
}

// current returns the in-memory state, loading it on first use.
func (st *stateStore) current(ctx context.Context) (*State, [][]byte, error) {
	if st.cached == nil {
		s, raw, err := st.load(ctx)
		if err != nil {
			return nil, nil, err
		}
		st.cached, st.raw = s, raw
	}
	return st.cached, st.raw, nil
}

// update runs fn on the current state and writes back every document
// whose content changed.
func (st *stateStore) update(ctx context.Context, fn func(*State) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, raw, err := st.current(ctx)
	if err != nil {
		return err
	}
	if err := fn(s); err != nil {
		// fn may have changed the state half-way: the store is the truth.
		st.cached = nil
		return err
	}
	return st.writeChanged(ctx, s, raw)
}

// writeChanged writes every document whose content changed and deletes
// the settled delivery records, in one fenced transaction: the documents
// now hold all the records said.
func (st *stateStore) writeChanged(ctx context.Context, s *State, raw [][]byte) error {
	var changed []int
	var data [][]byte
	vs := map[string][]byte{}
	for i, f := range st.files {
		b, err := kv.EncodeJSON(f.get(s))
		if err != nil {
			return fmt.Errorf("encode envoy %s: %w", f.key, err)
		}
		if raw[i] == nil && bytes.Equal(b, []byte("{}\n")) {
			continue
		}
		if bytes.Equal(b, raw[i]) {
			continue
		}
		vs[f.key] = b
		changed = append(changed, i)
		data = append(data, b)
	}
	if err := st.commit(ctx, vs); err != nil {
		if len(vs) > 0 {
			st.cached = nil // memory ran ahead of the documents: reload next time
		}
		return err
	}
	for j, i := range changed {
		raw[i] = data[j]
	}
	return nil
}

// record makes the delivery of message id durable, then applies it and fn
// to the in-memory state; the documents follow at the end of the tick.
func (st *stateStore) record(ctx context.Context, id string, d Delivery, fn func(*State)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current(ctx)
	if err != nil {
		return err
	}
	if err := st.putRecord(ctx, id, recRecorded, d); err != nil {
		return fmt.Errorf("record delivery %s: %w", id, err)
	}
	delete(st.doubt, id)
	st.settled[id] = true // the documents hold it after the next commit
	s.Deliveries[id] = d
	fn(s)
	st.dirty = true
	return nil
}

// finished notes that a message reached sent/ (its delivery is needed no
// more) or failed/: its record goes with the next commit.
func (st *stateStore) finished(id string, sent bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if sent && st.cached != nil {
		delete(st.cached.Deliveries, id)
	}
	_, begun := st.started[id]
	_, doubt := st.doubt[id]
	if begun || doubt { // a record of it is in the store
		st.settled[id] = true
	}
	delete(st.started, id)
	delete(st.doubt, id)
	st.dirty = true
}

// mutate runs fn on the in-memory state; a change it reports reaches the
// documents at the end of the tick (changes that may wait: a restart would
// redo them).
func (st *stateStore) mutate(ctx context.Context, fn func(*State) bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current(ctx)
	if err != nil {
		return err
	}
	if fn(s) {
		st.dirty = true
	}
	return nil
}

// flush writes the documents changed since the last write and deletes
// the settled records.
func (st *stateStore) flush(ctx context.Context) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.dirty || st.cached == nil {
		return nil
	}
	if err := st.writeChanged(ctx, st.cached, st.raw); err != nil {
		return err
	}
	st.dirty = false
	return nil
}
