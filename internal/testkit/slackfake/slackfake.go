// Package slackfake is a local stand-in for Slack that speaks the real
// protocols, for tests of the envoy and of the whole kingdom: one
// httptest.Server serves the Web API methods the envoy calls (auth.test,
// chat.postMessage, chat.update, chat.postEphemeral, views.open,
// reactions.add, apps.connections.open, and conversations.replies and
// conversations.history over what was posted) and the Socket Mode
// websocket that apps.connections.open points at. The fake pushes
// events_api envelopes and interactive ones (block_actions from a button
// click, view_submission from a modal, in the payload shapes Slack sends),
// records acks, pings the client, and can drop the connection.
//
// Point the product at it by its normal config: envoy.yaml
// `slack.api_url: <srv.APIURL()>` and any non-empty SLACK_BOT_TOKEN /
// SLACK_APP_TOKEN.
//
//	srv := slackfake.New()
//	defer srv.Close()
//	srv.WaitConnected(5 * time.Second)
//	env, _ := srv.PushMessage(slackfake.Msg{Channel: "D1", ChannelType: "im", User: "U1", Text: "hi", TS: "1700000000.000100"})
//	srv.WaitAck(env, 5*time.Second)
//	calls := srv.Calls("chat.postMessage")
//	p, _ := srv.Message("C1", ts)                  // a message with its blocks
//	env, _ = srv.Click(slackfake.Click{User: "U1", Channel: "C1", MessageTS: ts,
//		ActionID: "answer", Value: p.Buttons()["answer"]})
package slackfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Identity of the fake bot (auth.test).
const (
	BotUserID = "UBOT"
	BotID     = "BBOT"
	TeamID    = "T1"
)

// Call is one Web API request the fake received. Form holds the request's
// form fields (or JSON body fields) without the token.
type Call struct {
	Method string
	Form   url.Values
	// Token is the credential presented (form "token" or the Bearer header).
	Token string
}

// Msg is a Slack message event (message or app_mention) to push.
type Msg struct {
	Type        string // "message" (default) or "app_mention"
	Channel     string
	ChannelType string // "im", "channel", …
	User        string
	BotID       string
	SubType     string
	Text        string
	TS          string
	ThreadTS    string
	EventID     string // default: derived from TS and Type
}

type failure struct {
	code       string // Slack error code ("" with retryAfter>0 → 429)
	retryAfter int
}

// Posted is a message chat.postMessage accepted, as chat.update last
// left it.
type Posted struct {
	Channel, TS, ThreadTS, Text string
	// Blocks are the message's Block Kit blocks (nil: none).
	Blocks []map[string]any
	// Updates counts the chat.update calls on it.
	Updates int
}

func (p Posted) json() map[string]any {
	m := map[string]any{"type": "message", "user": BotUserID, "bot_id": BotID, "text": p.Text, "ts": p.TS}
	if p.ThreadTS != "" {
		m["thread_ts"] = p.ThreadTS
	}
	if p.Blocks != nil {
		m["blocks"] = p.Blocks
	}
	return m
}

// Buttons returns the message's buttons: action_id → value.
func (p Posted) Buttons() map[string]string {
	out := map[string]string{}
	for _, b := range p.Blocks {
		if b["type"] != "actions" {
			continue
		}
		els, _ := b["elements"].([]any)
		for _, el := range els {
			if m, ok := el.(map[string]any); ok && m["type"] == "button" {
				id, _ := m["action_id"].(string)
				v, _ := m["value"].(string)
				out[id] = v
			}
		}
	}
	return out
}

// Ephemeral is a message chat.postEphemeral showed to one user.
type Ephemeral struct {
	Channel, User, ThreadTS, Text string
}

// Click is a button click to push as a block_actions interaction.
type Click struct {
	User      string
	Channel   string
	MessageTS string
	ThreadTS  string
	ActionID  string
	Value     string
}

// Submission is a modal's submission to push as a view_submission
// interaction: Values is block_id → action_id → the input's value.
type Submission struct {
	User            string
	CallbackID      string
	PrivateMetadata string
	Values          map[string]map[string]string
}

// Server is the fake Slack.
type Server struct {
	srv *httptest.Server

	// PingInterval is how often the fake pings a connected client (default
	// 100 ms). Set before the client connects.
	PingInterval time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	calls    []Call
	failures map[string][]failure
	conn     *websocket.Conn
	connGen  int
	opens    int
	acks     map[string]int
	tsSeq    int64
	posted   []Posted
	ephem    []Ephemeral
	views    []map[string]any
	trigSeq  int
	writeMu  sync.Mutex
	envSeq   int
	closed   bool
}

// New starts the fake.
func New() *Server {
	s := &Server{
		PingInterval: 100 * time.Millisecond,
		failures:     map[string][]failure{},
		acks:         map[string]int{},
		tsSeq:        1700000000000100,
	}
	s.cond = sync.NewCond(&s.mu)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/link", s.link)
	s.srv = httptest.NewServer(mux)
	return s
}

// APIURL is the Web API base URL with its trailing slash, for slack.api_url.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// Close stops the fake and drops any connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.conn = nil
	s.cond.Broadcast()
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Fail makes the next n calls of method answer {"ok":false,"error":code}.
func (s *Server) Fail(method string, n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[method] = append(s.failures[method], failure{code: code})
	}
}

// RateLimit makes the next n calls of method answer HTTP 429 with
// Retry-After: retryAfter seconds.
func (s *Server) RateLimit(method string, n, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[method] = append(s.failures[method], failure{retryAfter: retryAfter})
	}
}

// Calls returns the recorded calls of method ("" = all), in order.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until method has been called at least n times.
func (s *Server) WaitCalls(method string, n int, timeout time.Duration) ([]Call, error) {
	ok := s.waitFor(timeout, func() bool {
		k := 0
		for _, c := range s.calls {
			if c.Method == method {
				k++
			}
		}
		return k >= n
	})
	calls := s.Calls(method)
	if !ok {
		return calls, fmt.Errorf("slackfake: %d %s calls after %v, want %d", len(calls), method, timeout, n)
	}
	return calls, nil
}

// Opens is the number of apps.connections.open calls so far.
func (s *Server) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Connected reports whether a Socket Mode client is connected.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}

// WaitConnected waits for a Socket Mode connection.
func (s *Server) WaitConnected(timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.conn != nil }) {
		return errors.New("slackfake: no socket mode connection")
	}
	return nil
}

// waitGen waits for a connection newer than generation gen.
func (s *Server) waitGen(gen int, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.conn != nil && s.connGen > gen }) {
		return errors.New("slackfake: no new socket mode connection")
	}
	return nil
}

// Drop closes the current websocket connection abruptly (no close frame)
// and waits until the client has connected again.
func (s *Server) Drop(timeout time.Duration) error {
	s.mu.Lock()
	c, gen := s.conn, s.connGen
	s.conn = nil
	s.mu.Unlock()
	if c == nil {
		return errors.New("slackfake: not connected")
	}
	c.UnderlyingConn().Close()
	return s.waitGen(gen, timeout)
}

// Disconnect sends Slack's {"type":"disconnect"} request, which makes the
// client reconnect, and waits for the new connection.
func (s *Server) Disconnect(timeout time.Duration) error {
	s.mu.Lock()
	gen := s.connGen
	s.mu.Unlock()
	if err := s.send(map[string]any{"type": "disconnect", "reason": "refresh_requested"}); err != nil {
		return err
	}
	return s.waitGen(gen, timeout)
}

// Push sends an events_api envelope carrying event (the inner event object)
// with the given event_id, and returns the envelope id. retry > 0 marks it as
// a redelivery (retry_attempt). It waits up to 60 s for a connection.
func (s *Server) Push(eventID string, event map[string]any, retry int) (string, error) {
	if err := s.WaitConnected(60 * time.Second); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.envSeq++
	envID := fmt.Sprintf("env-%d", s.envSeq)
	s.mu.Unlock()
	env := map[string]any{
		"type": "events_api", "envelope_id": envID, "accepts_response_payload": false,
		"retry_attempt": retry,
		"payload": map[string]any{
			"type": "event_callback", "token": "verif", "team_id": TeamID, "api_app_id": "A1",
			"event_id": eventID, "event_time": 1700000000, "event": event,
		},
	}
	if retry > 0 {
		env["retry_reason"] = "timeout"
	}
	return envID, s.send(env)
}

// PushMessage pushes m as a message (or app_mention) event.
func (s *Server) PushMessage(m Msg) (string, error) {
	return s.PushMessageRetry(m, 0)
}

// PushMessageRetry pushes m with retry_attempt set (a redelivery of the
// same event_id).
func (s *Server) PushMessageRetry(m Msg, retry int) (string, error) {
	typ := m.Type
	if typ == "" {
		typ = "message"
	}
	ev := map[string]any{"type": typ, "channel": m.Channel, "text": m.Text, "ts": m.TS, "event_ts": m.TS}
	if m.User != "" {
		ev["user"] = m.User
	}
	if m.ChannelType != "" {
		ev["channel_type"] = m.ChannelType
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
	}
	if m.SubType != "" {
		ev["subtype"] = m.SubType
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	id := m.EventID
	if id == "" {
		id = "Ev" + typ + strings.ReplaceAll(m.TS, ".", "")
	}
	return s.Push(id, ev, retry)
}

// PushInteractive sends an interactive envelope carrying payload and
// returns the envelope id.
func (s *Server) PushInteractive(payload map[string]any) (string, error) {
	if err := s.WaitConnected(60 * time.Second); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.envSeq++
	envID := fmt.Sprintf("env-%d", s.envSeq)
	s.mu.Unlock()
	return envID, s.send(map[string]any{"type": "interactive", "envelope_id": envID,
		"accepts_response_payload": true, "payload": payload})
}

// Click pushes a block_actions interaction: c.User clicked the button
// c.ActionID (value c.Value) on the message c.Channel/c.MessageTS. It
// returns the envelope id and the trigger id a views.open may use.
func (s *Server) Click(c Click) (envID, triggerID string, err error) {
	s.mu.Lock()
	s.trigSeq++
	triggerID = fmt.Sprintf("trig-%d", s.trigSeq)
	var msg map[string]any
	for _, p := range s.posted {
		if p.Channel == c.Channel && p.TS == c.MessageTS {
			msg = p.json()
		}
	}
	s.mu.Unlock()
	if msg == nil {
		msg = map[string]any{"type": "message", "ts": c.MessageTS, "text": ""}
	}
	container := map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.Channel, "is_ephemeral": false}
	if c.ThreadTS != "" {
		container["thread_ts"] = c.ThreadTS
	}
	payload := map[string]any{
		"type": "block_actions", "token": "verif", "api_app_id": "A1", "trigger_id": triggerID,
		"user":         map[string]any{"id": c.User, "username": strings.ToLower(c.User), "team_id": TeamID},
		"team":         map[string]any{"id": TeamID, "domain": "fake"},
		"container":    container,
		"channel":      map[string]any{"id": c.Channel, "name": "chan"},
		"message":      msg,
		"response_url": s.srv.URL + "/response/" + triggerID,
		"actions": []map[string]any{{
			"type": "button", "action_id": c.ActionID, "block_id": "kingdom-buttons", "value": c.Value,
			"action_ts": "1700000000.999999", "text": map[string]any{"type": "plain_text", "text": c.ActionID},
		}},
	}
	envID, err = s.PushInteractive(payload)
	return envID, triggerID, err
}

// Submit pushes a view_submission interaction of a modal.
func (s *Server) Submit(sub Submission) (string, error) {
	values := map[string]any{}
	for block, acts := range sub.Values {
		m := map[string]any{}
		for act, v := range acts {
			m[act] = map[string]any{"type": "plain_text_input", "value": v}
		}
		values[block] = m
	}
	payload := map[string]any{
		"type": "view_submission", "token": "verif", "api_app_id": "A1",
		"user": map[string]any{"id": sub.User, "username": strings.ToLower(sub.User), "team_id": TeamID},
		"team": map[string]any{"id": TeamID, "domain": "fake"},
		"view": map[string]any{"id": "V1", "type": "modal", "callback_id": sub.CallbackID,
			"private_metadata": sub.PrivateMetadata, "state": map[string]any{"values": values}},
	}
	return s.PushInteractive(payload)
}

// Message returns the message channel/ts as posted and updated.
func (s *Server) Message(channel, ts string) (Posted, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.posted {
		if p.Channel == channel && p.TS == ts {
			return p, true
		}
	}
	return Posted{}, false
}

// Messages returns every posted message, oldest first.
func (s *Server) Messages() []Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Posted(nil), s.posted...)
}

// Ephemerals returns the ephemeral messages shown so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephem...)
}

// Views returns the views views.open opened (each the "view" object, with
// "trigger_id" added).
func (s *Server) Views() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.views...)
}

// Acks returns how many times envelope id was acknowledged.
func (s *Server) Acks(envelopeID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acks[envelopeID]
}

// WaitAck waits until envelope id is acknowledged.
func (s *Server) WaitAck(envelopeID string, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.acks[envelopeID] > 0 }) {
		return fmt.Errorf("slackfake: envelope %s not acknowledged", envelopeID)
	}
	return nil
}

func (s *Server) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if s.closed || !time.Now().Before(deadline) {
			return cond()
		}
		s.cond.Wait()
	}
	return true
}

func (s *Server) send(v any) error {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return errors.New("slackfake: not connected")
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	return c.WriteJSON(v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	call := Call{Method: method, Form: url.Values{}}
	var body map[string]any
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		json.NewDecoder(r.Body).Decode(&body)
		for k, v := range body {
			if _, ok := v.(string); !ok {
				b, _ := json.Marshal(v)
				call.Form.Set(k, string(b))
				continue
			}
			call.Form.Set(k, fmt.Sprint(v))
		}
	} else if err := r.ParseForm(); err == nil {
		for k, v := range r.Form {
			call.Form[k] = v
		}
	}
	// slack-go sends the bot token in the form body for most methods and as
	// a Bearer header for JSON ones: accept both, record neither in Form.
	call.Token = call.Form.Get("token")
	call.Form.Del("token")
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		call.Token = strings.TrimPrefix(a, "Bearer ")
	}

	s.mu.Lock()
	s.calls = append(s.calls, call)
	var f *failure
	if q := s.failures[method]; len(q) > 0 {
		f = &q[0]
		s.failures[method] = q[1:]
	}
	if method == "apps.connections.open" {
		s.opens++
	}
	s.cond.Broadcast()
	s.mu.Unlock()

	if call.Token == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if f != nil {
		if f.code == "" {
			w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": f.code})
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "fake",
			"user": "kingdom", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "chat.postMessage":
		s.mu.Lock()
		s.tsSeq += 100
		ts := fmt.Sprintf("%d.%06d", s.tsSeq/1000000, s.tsSeq%1000000)
		s.posted = append(s.posted, Posted{Channel: call.Form.Get("channel"), TS: ts,
			ThreadTS: call.Form.Get("thread_ts"), Text: call.Form.Get("text"), Blocks: blocks(call.Form)})
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": call.Form.Get("channel"), "ts": ts,
			"message": map[string]any{"text": call.Form.Get("text"), "ts": ts}})
	case "chat.update":
		ch, ts := call.Form.Get("channel"), call.Form.Get("ts")
		s.mu.Lock()
		found := false
		for i := range s.posted {
			if p := &s.posted[i]; p.Channel == ch && p.TS == ts {
				found = true
				p.Updates++
				if _, ok := call.Form["text"]; ok {
					p.Text = call.Form.Get("text")
				}
				if _, ok := call.Form["blocks"]; ok { // absent: the blocks stay
					p.Blocks = blocks(call.Form)
				}
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if !found {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": call.Form.Get("text")})
	case "chat.postEphemeral":
		s.mu.Lock()
		s.ephem = append(s.ephem, Ephemeral{Channel: call.Form.Get("channel"), User: call.Form.Get("user"),
			ThreadTS: call.Form.Get("thread_ts"), Text: call.Form.Get("text")})
		s.tsSeq += 100
		ts := fmt.Sprintf("%d.%06d", s.tsSeq/1000000, s.tsSeq%1000000)
		s.cond.Broadcast()
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "message_ts": ts})
	case "views.open":
		view, _ := body["view"].(map[string]any)
		trigger, _ := body["trigger_id"].(string)
		if view == nil || trigger == "" {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		view["trigger_id"] = trigger
		s.mu.Lock()
		s.views = append(s.views, view)
		s.cond.Broadcast()
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": fmt.Sprintf("V%d", len(s.views)), "type": "modal"}})
	case "conversations.replies", "conversations.history":
		// One page: the thread of ts (its parent first), or the channel's
		// top-level messages newest first, each at or after oldest.
		ch, thread, oldest := call.Form.Get("channel"), call.Form.Get("ts"), call.Form.Get("oldest")
		msgs := []map[string]any{}
		s.mu.Lock()
		for _, p := range s.posted {
			if p.Channel != ch || (oldest != "" && p.TS < oldest) {
				continue
			}
			if method == "conversations.replies" && (p.TS == thread || p.ThreadTS == thread) {
				msgs = append(msgs, p.json())
			}
			if method == "conversations.history" && p.ThreadTS == "" {
				msgs = append([]map[string]any{p.json()}, msgs...)
			}
		}
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "messages": msgs, "has_more": false})
	case "reactions.add", "reactions.remove":
		writeJSON(w, map[string]any{"ok": true})
	case "apps.connections.open":
		writeJSON(w, map[string]any{"ok": true, "url": "ws://" + r.Host + "/link"})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// blocks decodes a call's "blocks" field (a JSON array in a form field).
func blocks(f url.Values) []map[string]any {
	raw := f.Get("blocks")
	if raw == "" {
		return nil
	}
	var out []map[string]any
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	return out
}

func (s *Server) link(w http.ResponseWriter, r *http.Request) {
	// The client dials with Origin: https://api.slack.com, which gorilla's
	// default origin check refuses.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	if old := s.conn; old != nil {
		old.Close()
	}
	s.conn = c
	s.connGen++
	gen := s.connGen
	s.cond.Broadcast()
	s.mu.Unlock()

	s.writeMu.Lock()
	err = c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A1"}})
	s.writeMu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	done := make(chan struct{})
	go func() { // pings: socketmode treats a silent server as dead
		t := time.NewTicker(s.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.writeMu.Lock()
				err := c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				s.writeMu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(done)
		c.Close()
		s.mu.Lock()
		if s.connGen == gen && s.conn == c {
			s.conn = nil
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for {
		var msg map[string]any
		if err := c.ReadJSON(&msg); err != nil {
			return
		}
		if id, ok := msg["envelope_id"].(string); ok {
			s.mu.Lock()
			s.acks[id]++
			s.cond.Broadcast()
			s.mu.Unlock()
		}
	}
}
