package engine

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// Parser reads an engine's stdout line by line.
type Parser interface {
	// Line consumes one stdout line (without the newline).
	Line(line []byte)
	// SessionID is the resume token, "" when none was seen.
	SessionID() string
	// FinalText is the agent's last answer text, "" when none was seen.
	FinalText() string
	// Usage is the token usage of the run (claude's result line), or nil.
	Usage() map[string]any
	// IsError reports whether the engine's own final record said the run
	// failed (claude: is_error on the result line).
	IsError() bool
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
// carries the final text and usage.
type claudeParser struct {
	session string
	final   string
	usage   map[string]any
	isErr   bool
	cost    any
}

type claudeLine struct {
	Type      string         `json:"type"`
	Subtype   string         `json:"subtype"`
	SessionID string         `json:"session_id"`
	Result    *string        `json:"result"`
	IsError   bool           `json:"is_error"`
	Usage     map[string]any `json:"usage"`
	CostUSD   any            `json:"total_cost_usd"`
}

func (p *claudeParser) Line(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	if l.SessionID != "" {
		p.session = l.SessionID
	}
	if l.Type == "result" {
		if l.Result != nil {
			p.final = *l.Result
		}
		p.isErr = l.IsError
		if l.Usage != nil {
			p.usage = l.Usage
			if l.CostUSD != nil {
				p.usage["total_cost_usd"] = l.CostUSD
			}
		}
	}
}

func (p *claudeParser) SessionID() string     { return p.session }
func (p *claudeParser) FinalText() string     { return p.final }
func (p *claudeParser) Usage() map[string]any { return p.usage }
func (p *claudeParser) IsError() bool         { return p.isErr }

// codexParser reads `codex exec --json` JSONL, best effort across codex
// versions: the thread/session id from thread.started or
// session_configured, the final text from the last agent message.
type codexParser struct {
	session string
	final   string
	usage   map[string]any
}

func (p *codexParser) Line(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return
	}
	if id, ok := m["thread_id"].(string); ok && id != "" {
		p.session = id
	}
	if id, ok := m["session_id"].(string); ok && id != "" {
		p.session = id
	}
	if u, ok := m["usage"].(map[string]any); ok {
		p.usage = u
	}
	// Newer codex: {"type":"item.completed","item":{"type":"agent_message","text":"..."}}
	if item, ok := m["item"].(map[string]any); ok {
		if t, _ := item["type"].(string); t == "agent_message" || t == "assistant_message" {
			if s, ok := item["text"].(string); ok {
				p.final = s
			}
		}
	}
	// Older codex: {"id":"0","msg":{"type":"agent_message","message":"..."}}
	if msg, ok := m["msg"].(map[string]any); ok {
		if id, ok := msg["session_id"].(string); ok && id != "" {
			p.session = id
		}
		if t, _ := msg["type"].(string); t == "agent_message" {
			if s, ok := msg["message"].(string); ok {
				p.final = s
			}
		}
	}
}

func (p *codexParser) SessionID() string     { return p.session }
func (p *codexParser) FinalText() string     { return p.final }
func (p *codexParser) Usage() map[string]any { return p.usage }
func (p *codexParser) IsError() bool         { return false }

// textParser keeps a command engine's stdout as its final text (capped).
type textParser struct {
	b strings.Builder
}

const maxText = 1 << 20

func (p *textParser) Line(line []byte) {
	if p.b.Len()+len(line) > maxText {
		return
	}
	p.b.Write(line)
	p.b.WriteByte('\n')
}

func (p *textParser) SessionID() string     { return "" }
func (p *textParser) FinalText() string     { return p.b.String() }
func (p *textParser) Usage() map[string]any { return nil }
func (p *textParser) IsError() bool         { return false }

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
