package modelfake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

type anthropicBody struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
	Input   json.RawMessage `json:"input"`
}

// blocksText appends the texts of a content value: a string or a list of
// blocks (tool results nest their own content).
func blocksText(raw json.RawMessage, texts, results *[]string) {
	if len(raw) == 0 {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		*texts = append(*texts, s)
		return
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			*texts = append(*texts, b.Text)
		case "tool_use":
			// The model's earlier tool calls, as their JSON input.
			*texts = append(*texts, string(b.Input))
		case "tool_result":
			var inner []string
			blocksText(b.Content, &inner, nil)
			for _, t := range inner {
				*texts = append(*texts, t)
				if results != nil {
					*results = append(*results, t)
				}
			}
		}
	}
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var b anthropicBody
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req := Request{API: Anthropic, Body: body}
	blocksText(b.System, &req.Texts, nil)
	for _, m := range b.Messages {
		if m.Role == "assistant" {
			req.Turn++
		}
		blocksText(m.Content, &req.Texts, &req.ToolResults)
	}
	for _, t := range b.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	rep := s.route(req)
	n := s.next()
	if isError(rep) {
		w.Header().Set("request-id", fmt.Sprintf("req_fake%d", n))
		writeAPIError(w, rep, func(typ, msg string) any {
			return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
		})
		return
	}
	startSSE(w)
	if rep.Raw != "" {
		fmt.Fprint(w, rep.Raw)
		return
	}
	in, out := usageOf(rep)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake%d", n), "type": "message", "role": "assistant", "model": "claude-fake",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1,
			"cache_read_input_tokens": rep.CacheRead, "cache_creation_input_tokens": rep.CacheCreation},
	}})
	idx := 0
	if rep.Text != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
			"delta": map[string]any{"type": "text_delta", "text": rep.Text}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if rep.ToolName != "" {
		name, input := rep.ToolName, rep.ToolInput
		if name == "shell" {
			name = "Bash"
		}
		if input == nil {
			input = map[string]any{}
		}
		js, _ := json.Marshal(input)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", n), "name": name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(js)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
