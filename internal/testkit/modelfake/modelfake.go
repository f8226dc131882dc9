// Package modelfake is a local stand-in for the model APIs the real agent
// CLIs call, for tests that run the real `claude` and `codex` binaries: one
// httptest.Server speaks the Anthropic Messages API (POST /v1/messages,
// server-sent events) and the OpenAI Responses API (POST /v1/responses,
// server-sent events). Every request is recorded, so a test can assert on
// the tools a CLI offered the model and on the earlier turns it sent back.
//
// Answers are scripted per scenario. A scenario is chosen by a marker string
// that appears in the request (the test puts it in the task's prompt); the
// turn is the number of assistant turns already in the conversation, so a
// resumed session continues the script where it stopped.
//
//	srv := modelfake.New()
//	defer srv.Close()
//	srv.Script("SCENARIO-ok", modelfake.Turns(
//	    modelfake.Tool("StructuredOutput", map[string]any{"status": "success", "summary": "done"}),
//	    modelfake.Text("All done."),
//	))
//	// claude: ANTHROPIC_BASE_URL=srv.URL; codex: a provider with base_url srv.URL+"/v1"
//	reqs := srv.Requests("SCENARIO-ok")
//
// Point the CLIs at it by their normal configuration (see CodexConfig and
// ClaudeEnv).
package modelfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// API names the protocol a request used.
type API string

// The protocols served.
const (
	Anthropic API = "anthropic" // POST /v1/messages
	OpenAI    API = "openai"    // POST /v1/responses
)

// Request is one recorded model call.
type Request struct {
	API      API
	Scenario string // the marker that matched, "" for none
	// Turn is the number of assistant turns already in the conversation.
	Turn int
	// Tools are the names of the tools the CLI offered.
	Tools []string
	// Texts are every text of the conversation (system, user, assistant,
	// the JSON input of earlier tool calls, tool results), in order.
	Texts []string
	// ToolResults are the outputs of earlier tool calls, in order.
	ToolResults []string
	// Body is the raw JSON body.
	Body []byte
}

// HasText reports whether any text of the conversation contains s.
func (r Request) HasText(s string) bool {
	for _, t := range r.Texts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// Reply is one scripted model answer.
type Reply struct {
	// Text is an assistant text block (may be combined with a tool call).
	Text string
	// ToolName and ToolInput make a tool call (Anthropic tool_use; OpenAI
	// function_call). On OpenAI, a tool named "shell" maps to the CLI's
	// shell tool (exec_command).
	ToolName  string
	ToolInput map[string]any
	// Status, when not 0 or 200, answers with an API error of this HTTP
	// status, ErrType and ErrMessage.
	Status     int
	ErrType    string
	ErrMessage string
	// Usage reported for the turn (defaults: 100 in, 20 out).
	InputTokens, OutputTokens, CacheRead, CacheCreation int
	// Raw, when set, is written as the SSE body as is (for shapes the
	// helpers do not cover, e.g. a usage-limit event).
	Raw string
	// Headers are extra response headers (a provider's rate-limit
	// headers, x-should-retry).
	Headers map[string]string
	// Body, with an error Status, replaces the API's error object (e.g.
	// OpenAI's {"error":{"type":"usage_limit_reached","resets_at":…}}).
	Body string
}

// Limit answers with HTTP 429 and body, final (x-should-retry: false, as
// a provider's usage limit is: the CLIs do not retry it for minutes).
func Limit(body string, headers map[string]string) Reply {
	h := map[string]string{"x-should-retry": "false"}
	for k, v := range headers {
		h[k] = v
	}
	return Reply{Status: http.StatusTooManyRequests, Body: body, Headers: h}
}

func writeHeaders(w http.ResponseWriter, rep Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
}

// Text is a plain assistant answer that ends the turn.
func Text(s string) Reply { return Reply{Text: s} }

// Tool is a tool call.
func Tool(name string, input map[string]any) Reply { return Reply{ToolName: name, ToolInput: input} }

// Shell is a shell command call: Anthropic's Bash tool, OpenAI's
// exec_command (codex).
func Shell(cmd string) Reply {
	return Reply{ToolName: "shell", ToolInput: map[string]any{"command": cmd}}
}

// APIError answers the request with an HTTP error in the API's error shape.
func APIError(status int, errType, msg string) Reply {
	return Reply{Status: status, ErrType: errType, ErrMessage: msg}
}

// Script chooses the reply to a request of its scenario.
type Script func(r Request) Reply

// Turns answers turn i with replies[i]; past the end, the last reply again.
func Turns(replies ...Reply) Script {
	return func(r Request) Reply {
		if len(replies) == 0 {
			return Text("")
		}
		if r.Turn < len(replies) {
			return replies[r.Turn]
		}
		return replies[len(replies)-1]
	}
}

// Always answers every turn with rep.
func Always(rep Reply) Script { return func(Request) Reply { return rep } }

// Server is the fake model API.
type Server struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	order    []string
	scripts  map[string]Script
	fallback Script
	reqs     []Request
	n        int
}

// New starts the fake on a loopback port. Requests matching no scenario
// get a plain "ok" text answer (the CLIs' side requests such as titles).
func New() *Server {
	s := &Server{scripts: map[string]Script{}, fallback: Always(Text("ok"))}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("POST /v1/responses", s.openai)
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":100}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Anything else (model lists, telemetry): an empty success.
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[],"models":[]}`)
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Script registers the script of the scenario whose marker appears in a
// request; when several appear, the longest marker wins.
func (s *Server) Script(marker string, sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.scripts[marker]; !ok {
		s.order = append(s.order, marker)
	}
	s.scripts[marker] = sc
}

// Fallback sets the script of requests that match no scenario.
func (s *Server) Fallback(sc Script) {
	s.mu.Lock()
	s.fallback = sc
	s.mu.Unlock()
}

// Requests returns the recorded requests of a scenario ("" = all).
func (s *Server) Requests(marker string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if marker == "" || r.Scenario == marker {
			out = append(out, r)
		}
	}
	return out
}

// route records r and returns its reply.
func (s *Server) route(r Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.fallback
	for _, m := range s.order {
		// The longest marker wins: "SCEN-a" must not take "SCEN-ab".
		if len(m) > len(r.Scenario) && bytes.Contains(r.Body, []byte(m)) {
			r.Scenario, sc = m, s.scripts[m]
		}
	}
	s.reqs = append(s.reqs, r)
	s.n++
	return sc(r)
}

func (s *Server) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n
}

const maxBody = 32 << 20

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return b, true
}

func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
}

func usageOf(rep Reply) (in, out int) {
	in, out = rep.InputTokens, rep.OutputTokens
	if in == 0 {
		in = 100
	}
	if out == 0 {
		out = 20
	}
	return in, out
}

// writeAPIError answers with rep's API error: its raw Body when set, else
// the protocol's JSON envelope that body builds from the error type
// (default invalid_request_error) and message.
func writeAPIError(w http.ResponseWriter, rep Reply, body func(typ, msg string) any) {
	w.Header().Set("Content-Type", "application/json")
	writeHeaders(w, rep)
	w.WriteHeader(rep.Status)
	if rep.Body != "" {
		io.WriteString(w, rep.Body)
		return
	}
	typ := rep.ErrType
	if typ == "" {
		typ = "invalid_request_error"
	}
	json.NewEncoder(w).Encode(body(typ, rep.ErrMessage))
}

// startSSE begins a 200 event-stream answer.
func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func isError(rep Reply) bool { return rep.Status != 0 && rep.Status != http.StatusOK }

// ClaudeEnv is the environment that points the claude CLI at the fake.
func (s *Server) ClaudeEnv() map[string]string {
	return map[string]string{
		"ANTHROPIC_BASE_URL":                       s.URL,
		"ANTHROPIC_API_KEY":                        "sk-ant-fake-modelfake",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
	}
}

// CodexConfig is a $CODEX_HOME/config.toml that points the codex CLI at the
// fake (OPENAI_API_KEY must be set to any value).
func (s *Server) CodexConfig() string {
	return fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, s.URL)
}
