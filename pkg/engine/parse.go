package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Parser reads an engine's stdout line by line into an Outcome.
type Parser interface {
	// Line consumes one stdout line (without the newline). It reports
	// whether the line is progress: claude's api_retry lines (the CLI
	// retrying the API by itself) are not, so they do not keep a stuck
	// soldier's heartbeat fresh (SPEC §10.8).
	Line(line []byte) (progress bool)
	// Outcome is what the lines said so far.
	Outcome() *Outcome
}

// Outcome is what an engine's output said about its run.
type Outcome struct {
	// SessionID is the resume token ("" when none was seen).
	SessionID string
	// FinalText is the agent's last answer text (claude's result, else
	// its last assistant text; codex's last agent message).
	FinalText string
	// Structured is claude's structured_output (SPEC §10.1), or nil.
	Structured json.RawMessage
	// Ended: the engine's own final record was seen (claude's result
	// line, codex's turn.completed or turn.failed).
	Ended bool
	// IsError: the final record said the run failed (claude is_error,
	// codex turn.failed).
	IsError bool
	// Subtype is claude's result subtype (success, error_during_execution,
	// error_max_turns, error_max_budget_usd, …).
	Subtype        string
	TerminalReason string
	APIErrorStatus int
	// Errors are claude's errors[], codex's turn.failed and error texts.
	Errors []string
	// Denials are claude's denied tool calls (permission_denials).
	Denials []Denial
	Usage   *doc.Usage
	// CostUSD is claude's total_cost_usd; nil for codex (no cost field).
	CostUSD *float64
	// Signals are the lines a usage-limit classifier reads (claude
	// rate_limit_event and system/api_retry, codex error and turn.failed),
	// in order.
	Signals []Signal
}

// Signal is one engine record about limits or failures, kept whole.
type Signal struct {
	// Kind: "rate_limit_event", "api_retry", "result" (claude's final line
	// when is_error); "error", "turn.failed", "usage_limit_reached" (codex).
	// Raw is the whole line, so engine.LimitWatch.Line can read it.
	Kind string
	// Text is the record's message, when it has one.
	Text string
	// Raw is the JSON line.
	Raw json.RawMessage
}

// maxSignals bounds the signals kept from one run.
const maxSignals = 64

func (o *Outcome) signal(kind, text string, line []byte) {
	if len(o.Signals) >= maxSignals {
		o.Signals = o.Signals[1:]
	}
	o.Signals = append(o.Signals, Signal{Kind: kind, Text: text, Raw: append(json.RawMessage(nil), line...)})
}

// Reason is what the engine itself said about a failed run (SPEC §10.3):
// subtype, API status, errors, permission denials and, for an error, its
// final text. Not redacted or bounded: the caller does both.
func (o *Outcome) Reason() string {
	var parts []string
	if o.Subtype != "" && o.Subtype != "success" {
		parts = append(parts, "subtype "+o.Subtype)
	}
	if o.APIErrorStatus != 0 {
		parts = append(parts, fmt.Sprintf("API error status %d", o.APIErrorStatus))
	}
	if o.IsError && strings.TrimSpace(o.FinalText) != "" {
		parts = append(parts, strings.TrimSpace(o.FinalText))
	}
	for _, e := range o.Errors {
		if e = strings.TrimSpace(e); e != "" && !slices.Contains(parts, e) {
			parts = append(parts, e)
		}
	}
	if d := o.denied(); d != "" {
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}

// denied is "permission denied: Bash(printenv X); Write(/etc/x)", or "".
func (o *Outcome) denied() string {
	if len(o.Denials) == 0 {
		return ""
	}
	ds := make([]string, len(o.Denials))
	for i, d := range o.Denials {
		ds[i] = d.String()
	}
	return "permission denied: " + strings.Join(ds, "; ")
}

// Denial is one tool call the engine's permissions refused.
type Denial struct {
	Tool string
	// Arg is what the call was about: the command, the path, the URL or
	// the question ("" when none), clipped.
	Arg string
}

// String renders the call: `Bash(rm -rf /x)`, `Write(/etc/x)`,
// `AskUserQuestion(Which branch?)`.
func (d Denial) String() string {
	if d.Arg == "" {
		return d.Tool
	}
	return d.Tool + "(" + d.Arg + ")"
}

// NewParser returns the output parser of engine name.
func NewParser(name string) Parser {
	switch name {
	case config.EngineClaude:
		return &claudeParser{}
	case config.EngineCodex:
		return &codexParser{}
	}
	return &textParser{}
}

// claudeParser reads `--output-format stream-json` lines: the init line
// and the final {"type":"result"} line carry session_id; the result line
// carries the final text, structured output, usage, cost and the reasons.
type claudeParser struct {
	o        Outcome
	lastText string
	// model is the one the init line names (what the CLI prices by).
	model string
	// msgs is the usage each assistant message reported, by message id:
	// the CLI prints one assistant line per content block, each repeating
	// its message's usage, so a message counts once (the largest figures
	// seen for it). Their sum is the run's usage when no result line
	// comes (a killed run).
	msgs    map[string]doc.Usage
	running doc.Usage
}

type claudeLine struct {
	Type              string          `json:"type"`
	Subtype           string          `json:"subtype"`
	SessionID         string          `json:"session_id"`
	Result            *string         `json:"result"`
	IsError           bool            `json:"is_error"`
	Usage             *doc.Usage      `json:"usage"`
	CostUSD           *float64        `json:"total_cost_usd"`
	Structured        json.RawMessage `json:"structured_output"`
	Errors            []any           `json:"errors"`
	PermissionDenials []struct {
		ToolName  string         `json:"tool_name"`
		ToolInput map[string]any `json:"tool_input"`
	} `json:"permission_denials"`
	TerminalReason string          `json:"terminal_reason"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	Model          string          `json:"model"`
	Message        *struct {
		ID      string     `json:"id"`
		Usage   *doc.Usage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
	Error string `json:"error"`
}

func (p *claudeParser) Line(line []byte) bool {
	line = bytes.TrimSpace(line)
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return true
	}
	o := &p.o
	if l.SessionID != "" {
		o.SessionID = l.SessionID
	}
	switch l.Type {
	case "rate_limit_event":
		o.signal("rate_limit_event", "", line)
	case "system":
		if l.Subtype == "api_retry" {
			o.signal("api_retry", l.Error, line)
			return false
		}
		if l.Subtype == "init" && l.Model != "" {
			p.model = l.Model
		}
	case "assistant":
		if l.Message != nil && l.Message.Usage != nil && l.Message.ID != "" {
			p.count(l.Message.ID, *l.Message.Usage)
		}
		if l.Message != nil {
			for _, c := range l.Message.Content {
				if c.Type == "text" && strings.TrimSpace(c.Text) != "" {
					p.lastText = c.Text
				}
			}
		}
	case "result":
		o.Ended = true
		o.Subtype = l.Subtype
		o.IsError = l.IsError
		o.TerminalReason = l.TerminalReason
		o.FinalText = p.lastText
		if l.Result != nil && *l.Result != "" {
			o.FinalText = *l.Result
		}
		if len(l.Structured) > 0 && !bytes.Equal(l.Structured, []byte("null")) {
			o.Structured = append(json.RawMessage(nil), l.Structured...)
		}
		if l.Usage != nil {
			o.Usage = l.Usage
		}
		o.CostUSD = l.CostUSD
		var st int
		if json.Unmarshal(l.APIErrorStatus, &st) == nil {
			o.APIErrorStatus = st
		}
		for _, e := range l.Errors {
			switch t := e.(type) {
			case string:
				o.Errors = append(o.Errors, t)
			default:
				b, _ := json.Marshal(t)
				o.Errors = append(o.Errors, string(b))
			}
		}
		for _, d := range l.PermissionDenials {
			o.Denials = append(o.Denials, denial(d.ToolName, d.ToolInput))
		}
		if l.IsError {
			o.signal("result", o.FinalText, line)
		}
	}
	return true
}

// denial reads a denied tool call's tool and argument.
func denial(tool string, input map[string]any) Denial {
	for _, k := range []string{"command", "file_path", "path", "url", "question"} {
		if v, ok := input[k].(string); ok && v != "" {
			return Denial{Tool: tool, Arg: redact.Clip(v, 200)}
		}
	}
	if qs, ok := input["questions"].([]any); ok && len(qs) > 0 {
		if q, ok := qs[0].(map[string]any); ok {
			if s, ok := q["question"].(string); ok {
				return Denial{Tool: tool, Arg: redact.Clip(s, 200)}
			}
		}
	}
	return Denial{Tool: tool}
}

// count records one assistant line's usage for message id.
func (p *claudeParser) count(id string, u doc.Usage) {
	if p.msgs == nil {
		p.msgs = map[string]doc.Usage{}
	}
	old := p.msgs[id]
	u = doc.Usage{InputTokens: max(u.InputTokens, old.InputTokens), OutputTokens: max(u.OutputTokens, old.OutputTokens),
		CacheReadInputTokens:     max(u.CacheReadInputTokens, old.CacheReadInputTokens),
		CacheCreationInputTokens: max(u.CacheCreationInputTokens, old.CacheCreationInputTokens)}
	p.msgs[id] = u
	r := &p.running
	r.InputTokens += u.InputTokens - old.InputTokens
	r.OutputTokens += u.OutputTokens - old.OutputTokens
	r.CacheReadInputTokens += u.CacheReadInputTokens - old.CacheReadInputTokens
	r.CacheCreationInputTokens += u.CacheCreationInputTokens - old.CacheCreationInputTokens
}

func (p *claudeParser) Outcome() *Outcome {
	o := p.o
	if !o.Ended {
		o.FinalText = p.lastText
	}
	if o.Usage == nil && len(p.msgs) > 0 {
		// No result line (yet): what the messages so far reported,
		// priced as the CLI prices its model. The streamed lines carry a
		// message's output tokens as counted at its start, so this is a
		// floor of what the provider bills.
		u := p.running
		o.Usage = &u
		o.CostUSD = ClaudeCost(p.model, o.Usage)
	}
	return &o
}

// codexParser reads `codex exec --json` JSONL: thread.started carries the
// thread id (the resume token), item.completed agent messages the text,
// turn.completed the usage, turn.failed and error events the reasons.
type codexParser struct {
	o Outcome
}

type codexLine struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (p *codexParser) Line(line []byte) bool {
	line = bytes.TrimSpace(line)
	var l codexLine
	if json.Unmarshal(line, &l) != nil {
		return true
	}
	o := &p.o
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			o.SessionID = l.ThreadID
		}
	case "item.completed":
		if l.Item != nil && (l.Item.Type == "agent_message" || l.Item.Type == "assistant_message") && l.Item.Text != "" {
			o.FinalText = l.Item.Text
		}
	case "turn.completed":
		o.Ended = true
		if u := l.Usage; u != nil {
			// codex counts cached tokens inside input_tokens; the usage
			// record keeps them apart, as claude does.
			in := u.InputTokens - u.CachedInputTokens
			if in < 0 {
				in = 0
			}
			o.Usage = o.Usage.Add(&doc.Usage{InputTokens: in, OutputTokens: u.OutputTokens,
				CacheReadInputTokens: u.CachedInputTokens, CacheCreationInputTokens: u.CacheWriteTokens})
		}
	case "turn.failed":
		o.Ended, o.IsError = true, true
		msg := ""
		if l.Error != nil {
			msg = l.Error.Message
		}
		if msg != "" {
			o.Errors = append(o.Errors, msg)
		}
		o.signal("turn.failed", msg, line)
	case "error":
		if l.Message != "" {
			o.Errors = append(o.Errors, l.Message)
		}
		o.signal("error", l.Message, line)
	case "usage_limit_reached":
		// The API's own form, passed through by some codex versions.
		o.signal("usage_limit_reached", "", line)
	}
	return true
}

func (p *codexParser) Outcome() *Outcome {
	o := p.o
	return &o
}

// textParser keeps a command engine's stdout as its final text (capped).
type textParser struct {
	b strings.Builder
}

const maxText = 1 << 20

func (p *textParser) Line(line []byte) bool {
	if p.b.Len()+len(line) > maxText {
		return true
	}
	p.b.Write(line)
	p.b.WriteByte('\n')
	return true
}

func (p *textParser) Outcome() *Outcome { return &Outcome{FinalText: p.b.String()} }

// ExtractJSONObject finds the first JSON object embedded in text (an
// answer may wrap it in prose or a ```json fence) and decodes it into v.
func ExtractJSONObject(text string, v any) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			continue
		}
		if json.Unmarshal(raw, v) == nil {
			return true
		}
	}
	return false
}
