package modelfake

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAnthropic_ScriptByMarkerAndTurn(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script("SCEN-a", Turns(Tool("StructuredOutput", map[string]any{"status": "success"}), Text("done")))
	s.Script("SCEN-ab", Always(APIError(400, "", "Your credit balance is too low")))
	first := `{"stream":true,"system":"sys","tools":[{"name":"Bash"},{"name":"StructuredOutput"}],"messages":[{"role":"user","content":"SCEN-a go"}]}`
	code, body := post(t, s.URL+"/v1/messages?beta=true", first)
	if code != 200 || !strings.Contains(body, "event: message_start") || !strings.Contains(body, `"name":"StructuredOutput"`) ||
		!strings.Contains(body, `"stop_reason":"tool_use"`) || !strings.Contains(body, `{\"status\":\"success\"}`) {
		t.Fatalf("turn 0: %d %s", code, body)
	}
	second := `{"stream":true,"messages":[{"role":"user","content":"SCEN-a go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"StructuredOutput","input":{"status":"success"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok then"}]}]}`
	if _, body := post(t, s.URL+"/v1/messages", second); !strings.Contains(body, `"text":"done"`) || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Fatalf("turn 1: %s", body)
	}
	code, body = post(t, s.URL+"/v1/messages", `{"messages":[{"role":"user","content":"SCEN-ab"}]}`)
	if code != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "credit balance") {
		t.Fatalf("longest marker / API error: %d %s", code, body)
	}
	reqs := s.Requests("SCEN-a")
	if len(reqs) != 2 || reqs[0].Turn != 0 || reqs[1].Turn != 1 || len(reqs[0].Tools) != 2 ||
		!reqs[1].HasText("ok then") || !reqs[1].HasText(`{"status":"success"}`) || reqs[1].ToolResults[0] != "ok then" {
		t.Fatalf("recorded %+v", reqs)
	}
	if len(s.Requests("")) != 3 {
		t.Fatalf("all requests: %d", len(s.Requests("")))
	}
}

func TestOpenAI_ShellCallTextAndErrors(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script("SCEN-x", Turns(Shell("git status"), Text(`{"status":"success"}`)))
	s.Script("SCEN-lim", Always(APIError(429, "usage_limit_reached", "You've hit your usage limit.")))
	code, body := post(t, s.URL+"/v1/responses", `{"instructions":"be good","tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"SCEN-x"}]}]}`)
	if code != 200 || !strings.Contains(body, `"name":"exec_command"`) || !strings.Contains(body, `{\"cmd\":\"git status\"}`) || !strings.Contains(body, "response.completed") {
		t.Fatalf("turn 0: %d %s", code, body)
	}
	_, body = post(t, s.URL+"/v1/responses", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"SCEN-x"}]},{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"clean"}]}`)
	if !strings.Contains(body, `"output_text"`) || !strings.Contains(body, `{\"status\":\"success\"}`) {
		t.Fatalf("turn 1: %s", body)
	}
	if code, body := post(t, s.URL+"/v1/responses", `{"input":[{"type":"message","role":"user","content":"SCEN-lim"}]}`); code != 429 || !strings.Contains(body, "usage_limit_reached") {
		t.Fatalf("limit: %d %s", code, body)
	}
	reqs := s.Requests("SCEN-x")
	if len(reqs) != 2 || reqs[1].Turn != 1 || reqs[1].ToolResults[0] != "clean" || reqs[0].Tools[1] != "web_search" || !reqs[0].HasText("be good") {
		t.Fatalf("recorded %+v", reqs)
	}
}
