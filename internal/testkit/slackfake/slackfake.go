// Package slackfake is a local stand-in for Slack that speaks the real
// protocols, for tests of the envoy and of the whole kingdom: one
// httptest.Server serves the Web API methods the envoy calls (auth.test,
// chat.postMessage, reactions.add, apps.connections.open, and
// conversations.replies and conversations.history over what was posted)
// and the Socket
// Mode websocket that apps.connections.open points at. The fake pushes
// events_api envelopes, records acks, pings the client, and can drop the
// connection.
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

// posted is a message chat.postMessage accepted.
type posted struct {
	channel, ts, threadTS, text string
}

func (p posted) json() map[string]any {
	m := map[string]any{"type": "message", "user": BotUserID, "bot_id": BotID, "text": p.text, "ts": p.ts}
	if p.threadTS != "" {
		m["thread_ts"] = p.threadTS
	}
	return m
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
	posted   []posted
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
// a redelivery (retry_attempt). It waits up to 5 s for a connection.
func (s *Server) Push(eventID string, event map[string]any, retry int) (string, error) {
	if err := s.WaitConnected(5 * time.Second); err != nil {
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
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.WriteJSON(v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	call := Call{Method: method, Form: url.Values{}}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		for k, v := range body {
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
		s.posted = append(s.posted, posted{channel: call.Form.Get("channel"), ts: ts,
			threadTS: call.Form.Get("thread_ts"), text: call.Form.Get("text")})
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "channel": call.Form.Get("channel"), "ts": ts,
			"message": map[string]any{"text": call.Form.Get("text"), "ts": ts}})
	case "conversations.replies", "conversations.history":
		// One page: the thread of ts (its parent first), or the channel's
		// top-level messages newest first, each at or after oldest.
		ch, thread, oldest := call.Form.Get("channel"), call.Form.Get("ts"), call.Form.Get("oldest")
		msgs := []map[string]any{}
		s.mu.Lock()
		for _, p := range s.posted {
			if p.channel != ch || (oldest != "" && p.ts < oldest) {
				continue
			}
			if method == "conversations.replies" && (p.ts == thread || p.threadTS == thread) {
				msgs = append(msgs, p.json())
			}
			if method == "conversations.history" && p.threadTS == "" {
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
