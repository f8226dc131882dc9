package modelfake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

type openaiBody struct {
	Instructions string            `json:"instructions"`
	Input        []json.RawMessage `json:"input"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

type openaiItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Output    json.RawMessage `json:"output"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
}

func openaiTexts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var b openaiBody
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, `{"error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req := Request{API: OpenAI, Body: body}
	if b.Instructions != "" {
		req.Texts = append(req.Texts, b.Instructions)
	}
	for _, raw := range b.Input {
		var it openaiItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "message", "":
			if it.Role == "assistant" {
				req.Turn++
			}
			req.Texts = append(req.Texts, openaiTexts(it.Content)...)
		case "function_call", "custom_tool_call", "local_shell_call":
			req.Turn++
			req.Texts = append(req.Texts, it.Arguments+it.Input)
		case "function_call_output", "custom_tool_call_output":
			t := openaiTexts(it.Output)
			req.Texts = append(req.Texts, t...)
			req.ToolResults = append(req.ToolResults, t...)
		}
	}
	for _, t := range b.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		req.Tools = append(req.Tools, name)
	}
	rep := s.route(req)
	n := s.next()
	if isError(rep) {
		writeAPIError(w, rep, func(typ, msg string) any {
			return map[string]any{"error": map[string]any{"type": typ, "message": msg, "code": typ}}
		})
		return
	}
	startSSE(w)
	if rep.Raw != "" {
		fmt.Fprint(w, rep.Raw)
		return
	}
	id := fmt.Sprintf("resp_fake%d", n)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	idx := 0
	if rep.Text != "" {
		item := map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_fake%d", n),
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": idx, "item": item})
		sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": idx,
			"item_id": item["id"], "content_index": 0, "delta": rep.Text})
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item})
		idx++
	}
	if rep.ToolName != "" {
		name, input := rep.ToolName, rep.ToolInput
		if name == "shell" {
			name = "exec_command"
			input = map[string]any{"cmd": input["command"]}
		}
		js, _ := json.Marshal(input)
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%d", n), "call_id": fmt.Sprintf("call_fake%d", n),
			"name": name, "arguments": string(js)}
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": idx, "item": item})
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item})
	}
	in, out := usageOf(rep)
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": id, "status": "completed",
		"usage": map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": rep.CacheRead},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + out},
	}})
}
