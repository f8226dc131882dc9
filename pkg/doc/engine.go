package doc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kingdom-dev/kingdom/schemas"
)

// agentFields are the raw result's properties an agent may set in its
// structured output (SPEC §10.1). task_id, session_id, retry_count, usage,
// cost, terminal and error_reason are the soldier's to fill, never trusted
// from the agent.
var agentFields = []string{"status", "summary", "error", "question", "reason",
	"memory_updates", "notify_channel", "proclamation", "metrics", "track_conversation", "outputs"}

// agentStatuses are the statuses an agent may report (killed is ours).
var agentStatuses = []any{ResultSuccess, ResultFailed, ResultNeedsHuman, ResultSkipped}

// engineSchemas holds each variant, built on first use: a soldier needs
// one (claude the plain, codex the strict), and building one parses the
// embedded schemas (both took 0.35–0.55 ms of each soldier start, measured).
var engineSchemas = [2]func() ([]byte, error){
	sync.OnceValues(func() ([]byte, error) { return buildEngineSchema(false) }),
	sync.OnceValues(func() ([]byte, error) { return buildEngineSchema(true) }),
}

// EngineResultSchema returns the JSON Schema of the result an agent gives
// as its structured output: schemas/raw-result.json with its references
// inlined and the soldier's fields removed (one source). strict makes the
// OpenAI strict form codex requires (every property required, optional
// ones nullable, no additional properties, no conditionals); a document
// valid under it becomes a raw result after StripNulls.
func EngineResultSchema(strict bool) ([]byte, error) {
	if strict {
		return engineSchemas[1]()
	}
	return engineSchemas[0]()
}

func readSchema(name string) (map[string]any, error) {
	b, err := schemas.FS.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

func buildEngineSchema(strict bool) ([]byte, error) {
	raw, err := readSchema("raw-result.json")
	if err != nil {
		return nil, err
	}
	defsDoc, err := readSchema("defs.json")
	if err != nil {
		return nil, err
	}
	defs, _ := defsDoc["$defs"].(map[string]any)
	inlined, err := inline(raw, defs, 0)
	if err != nil {
		return nil, err
	}
	doc := inlined.(map[string]any)
	props, _ := doc["properties"].(map[string]any)
	out := map[string]any{"type": "object", "title": "Kingdom task result",
		"description": "Report the outcome of the task with this result, once, at the end."}
	keep := map[string]any{}
	for _, f := range agentFields {
		if p, ok := props[f]; ok {
			keep[f] = p
		}
	}
	if st, ok := keep["status"].(map[string]any); ok {
		st["enum"] = agentStatuses
		st["type"] = "string"
	}
	if !strict {
		out["properties"] = keep
		out["required"] = []any{"status", "summary"}
		if all, ok := doc["allOf"]; ok {
			out["allOf"] = all
		}
		return json.Marshal(out)
	}
	delete(keep, "metrics") // a free-form object cannot be strict
	names := make([]string, 0, len(keep))
	for k := range keep {
		names = append(names, k)
	}
	slices.Sort(names)
	req := make([]any, 0, len(names))
	for _, k := range names {
		req = append(req, k)
		p := strictify(keep[k])
		if k != "status" && k != "summary" {
			p = nullable(p)
		}
		keep[k] = p
	}
	out["properties"] = keep
	out["required"] = req
	out["additionalProperties"] = false
	return json.Marshal(out)
}

// inline replaces every $ref to defs.json (or #/$defs) by its definition.
func inline(v any, defs map[string]any, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("schema references nest too deep")
	}
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		if ref, ok := t["$ref"].(string); ok {
			name := ref[strings.LastIndex(ref, "/")+1:]
			d, ok := defs[name]
			if !ok || !strings.Contains(ref, "$defs/") {
				return nil, fmt.Errorf("schema reference %q not found", ref)
			}
			r, err := inline(d, defs, depth+1)
			if err != nil {
				return nil, err
			}
			for k, x := range r.(map[string]any) {
				out[k] = x
			}
		}
		for k, x := range t {
			switch k {
			case "$ref", "$id", "$schema":
				continue
			}
			r, err := inline(x, defs, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			r, err := inline(x, defs, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// strictify removes what OpenAI's strict mode rejects and closes objects.
func strictify(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		switch k {
		case "minLength", "maxLength", "minimum", "maximum", "pattern", "format", "description":
			continue
		case "items":
			out[k] = strictify(x)
		case "properties":
			ps := map[string]any{}
			var req []any
			for n, p := range x.(map[string]any) {
				ps[n] = strictify(p)
				req = append(req, n)
			}
			slices.SortFunc(req, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			out["properties"] = ps
			out["required"] = req
			out["additionalProperties"] = false
		case "required":
			// recomputed from properties
		default:
			out[k] = x
		}
	}
	return out
}

// nullable lets a strict property be null (how strict mode marks it
// optional).
func nullable(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	switch t := m["type"].(type) {
	case string:
		m["type"] = []any{t, "null"}
	case nil:
		if _, ok := m["enum"]; ok {
			m["enum"] = append(m["enum"].([]any), nil)
		}
	}
	return m
}

// StripNulls removes the top-level null properties of an agent's strict
// structured output, so it reads as a raw result.
func StripNulls(m map[string]any) {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
}
