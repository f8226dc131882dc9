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

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// ThreadMapping is one entry of state/envoy/thread-mappings.json, keyed by
// task id: the Slack thread that task reports into.
type ThreadMapping struct {
	Channel   string            `json:"channel"`
	ThreadTS  string            `json:"thread_ts"`
	SourceRef *schema.SourceRef `json:"source_ref,omitempty"`
	CreatedAt string            `json:"created_at"`
}

// Awaited is one entry of state/envoy/awaiting-responses.json, keyed by
// task id: a question posted in a thread whose first accepted reply resumes
// the task.
type Awaited struct {
	TaskID       string               `json:"task_id"`
	Channel      string               `json:"channel"`
	ThreadTS     string               `json:"thread_ts"`
	ReplyContext *schema.ReplyContext `json:"reply_context"`
	MsgID        string               `json:"msg_id"`
	CreatedAt    string               `json:"created_at"`
}

// Conversation is one entry of state/envoy/conversation-threads.json, keyed
// by "<channel>/<thread_ts>": a thread whose replies are routed back to a
// general until ExpiresAt.
type Conversation struct {
	Channel      string               `json:"channel"`
	ThreadTS     string               `json:"thread_ts"`
	ReplyContext *schema.ReplyContext `json:"reply_context"`
	ExpiresAt    string               `json:"expires_at"`
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
	if t, err := schema.ParseTime(c.ExpiresAt); err != nil || !now.Before(t) {
		return c, false
	}
	return c, true
}

// stateStore loads and saves State. Every change happens under one mutex, so the
// socket goroutine and the tick never lose each other's updates.
//
// Only the envoy (its single leader) writes these files, so the state is
// read from disk once and then kept in memory. The truth on disk is the
// files plus the delivery journal (journal.go): a delivery is journaled at
// once and the files are written at the end of the tick; any other change
// (update) is written at once, atomically, for each file whose content
// changed.
type stateStore struct {
	mu    sync.Mutex
	l     layout.Layout
	kv    kv.KV // the documents (kv.NSEnvoy)
	log   *slog.Logger
	files []stateFile

	cached *State
	raw    [][]byte // each file's bytes as last read or written

	j     journal // the delivery journal (journal.go) or records (deliveries.go)
	dirty bool    // memory is ahead of the files
	// replay applies the bookkeeping of journaled deliveries at load.
	replay func(*State, []journalEntry)
}

// stateFile is one document: its key in kv.NSEnvoy (in file mode its file
// name under state/envoy/) and the part of State it holds.
type stateFile struct {
	key string
	get func(*State) any
}

func newStore(l layout.Layout, s kv.KV, j journal, log *slog.Logger) *stateStore {
	return &stateStore{l: l, kv: s, j: j, log: log, files: []stateFile{
		{kv.KeyMappings, func(s *State) any { return &s.Mappings }},
		{kv.KeyAwaiting, func(s *State) any { return &s.Awaiting }},
		{kv.KeyConversations, func(s *State) any { return &s.Conversations }},
		{kv.KeyDeliveries, func(s *State) any { return &s.Deliveries }},
	}}
}

func (st *stateStore) load() (*State, [][]byte, error) {
	ctx := context.Background()
	s := &State{}
	raw := make([][]byte, len(st.files))
	for i, f := range st.files {
		b, err := st.kv.Get(ctx, kv.NSEnvoy, f.key)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("load envoy %s: %w", f.key, err)
		}
		if err := json.Unmarshal(b, f.get(s)); err != nil {
			// A corrupt document must not stop the envoy forever: keep it
			// aside for the operator and start that part afresh.
			aside := fmt.Sprintf("%s.corrupt-%d", f.key, time.Now().Unix())
			if perr := st.kv.Put(ctx, kv.NSEnvoy, aside, b); perr != nil {
				return nil, nil, fmt.Errorf("load envoy %s: %w", f.key, err)
			}
			if derr := st.kv.Delete(ctx, kv.NSEnvoy, f.key); derr != nil {
				return nil, nil, fmt.Errorf("load envoy %s: %w", f.key, derr)
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
	entries, err := st.j.read()
	if err != nil {
		return nil, nil, err
	}
	for _, je := range entries {
		s.Deliveries[je.ID] = je.D
	}
	if len(entries) > 0 && st.replay != nil {
		st.replay(s, entries)
		st.dirty = true // the files lag the journal: written at the next flush
	}
	return s, raw, nil
}

// view runs fn on the current state.
func (st *stateStore) view(fn func(*State)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current()
	if err != nil {
		return err
	}
	fn(s)
	return nil
}

// current returns the in-memory state, loading it on first use.
func (st *stateStore) current() (*State, [][]byte, error) {
	if st.cached == nil {
		s, raw, err := st.load()
		if err != nil {
			return nil, nil, err
		}
		st.cached, st.raw = s, raw
	}
	return st.cached, st.raw, nil
}

// update runs fn on the current state and writes back (atomically, 0600)
// every file whose content changed.
func (st *stateStore) update(fn func(*State) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, raw, err := st.current()
	if err != nil {
		return err
	}
	if err := fn(s); err != nil {
		// fn may have changed the state half-way: the disk is the truth.
		st.cached = nil
		return err
	}
	return st.writeChanged(s, raw)
}

// writeChanged writes every document whose content changed, at once (file
// mode: atomically, 0600, one group commit; a store: one transaction),
// then empties the delivery journal: the documents now hold all it
// recorded.
func (st *stateStore) writeChanged(s *State, raw [][]byte) error {
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
	if err := st.j.commit(vs); err != nil {
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

// reserve makes room for the delivery records of n messages.
func (st *stateStore) reserve(n int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.j.reserve(n)
}

// begin notes, durably, that message id is about to be posted.
func (st *stateStore) begin(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, _, err := st.current(); err != nil {
		return err
	}
	return st.j.begin(id)
}

// record makes the delivery of message id durable, then applies it and fn
// to the in-memory state; the documents follow at the end of the tick.
func (st *stateStore) record(id string, d Delivery, fn func(*State)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current()
	if err != nil {
		return err
	}
	if err := st.j.record(id, d); err != nil {
		return err
	}
	s.Deliveries[id] = d
	fn(s)
	st.dirty = true
	return nil
}

// finished notes that a message reached sent/ (its delivery record is
// needed no more: the journal keeps it until the documents are written)
// or failed/.
func (st *stateStore) finished(id string, sent bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if sent && st.cached != nil {
		delete(st.cached.Deliveries, id)
		st.dirty = true
	}
	if st.j.settle(id) {
		st.dirty = true
	}
}

// mutate runs fn on the in-memory state; a change it reports reaches the
// documents at the end of the tick (changes that may wait: a restart would
// redo them).
func (st *stateStore) mutate(fn func(*State) bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current()
	if err != nil {
		return err
	}
	if fn(s) {
		st.dirty = true
	}
	return nil
}

// flush writes the documents changed since the last write and empties
// the journal.
func (st *stateStore) flush() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.dirty || st.cached == nil {
		return nil
	}
	if err := st.writeChanged(st.cached, st.raw); err != nil {
		return err
	}
	st.dirty = false
	return nil
}
