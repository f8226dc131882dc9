// Command fakeclaude stands in for the claude CLI in the general's tests
// and the end-to-end tests. It checks the argv of SPEC §9.16, reads the
// prompt from stdin, records each call in
// $KINGDOM_BASE_DIR/fake-calls/<task>-<n>.json (n counts the task's calls
// from 0), prints stream-json lines and writes the agent's result to
// $KINGDOM_RESULT_PATH.
//
// A scenario file, $KINGDOM_BASE_DIR/fake/scenario-<task>.json, else
// fake/scenario.json, says what to do when there is one: {"mode",
// "session_id", "sleep_ms", "memory_updates"}, mode one of success (the
// default), dirty, needs_human, bad_status, fail, exit3, usage_limit,
// hang, hang_heartbeat, garbage (pkg/general's tests).
//
// Without one the task's own payload (queue/tasks/in_progress/<task>.json)
// does (the end-to-end tests):
//
//   - a petition (task id evt-…): answers {"general": payload.petition_general
//     or "gen-herald"} as its final text;
//   - payload.die_first on attempt 0: SIGKILLs its parent soldier runner (the
//     soldier's session dies without a result);
//   - payload.needs_human on a first run: asks a question;
//   - payload.leak on a first run: prints its GH_TOKEN and the base dir's
//     kingdom.env to stdout and stderr, and fails (terminal) quoting them
//     and payload.leak's text (a hostile or careless agent);
//   - payload.hold_file: waits until that file (under the base dir) exists,
//     then succeeds (a soldier that stays alive while the test acts);
//   - a resume task: requires --resume <the --session-id its original task
//     was given> and succeeds;
//   - otherwise success.
//
// Invoked as `fakeclaude command <task_id> <result_path>` it is an instant
// command engine (benchmarks).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// call is what a run records of itself.
type call struct {
	TaskID            string   `json:"task_id"`
	Args              []string `json:"args"`
	Cwd               string   `json:"cwd"`
	Prompt            string   `json:"prompt"`
	Resume            string   `json:"resume"`
	SessionID         string   `json:"session_id"` // the --session-id given
	Model             string   `json:"model"`
	SlackTokenVisible bool     `json:"slack_token_visible"`
	HeartbeatPath     string   `json:"heartbeat_path"`
}

type scenario struct {
	Mode          string   `json:"mode"`
	SessionID     string   `json:"session_id"`
	SleepMS       int      `json:"sleep_ms"`
	MemoryUpdates []string `json:"memory_updates"`
}

type task struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	RetryCount int            `json:"retry_count"`
	Payload    map[string]any `json:"payload"`
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "command" {
		writeResult(os.Args[3], map[string]any{"task_id": os.Args[2], "status": "success", "summary": "instant"})
		return
	}
	args := os.Args[1:]
	for i, w := range []string{"-p", "--output-format", "stream-json", "--verbose"} {
		if i >= len(args) || args[i] != w {
			fmt.Fprintf(os.Stderr, "fakeclaude: bad argv %q\n", args)
			os.Exit(64)
		}
	}
	base, id, resultPath := os.Getenv("KINGDOM_BASE_DIR"), os.Getenv("KINGDOM_TASK_ID"), os.Getenv("KINGDOM_RESULT_PATH")
	if base == "" || id == "" || resultPath == "" {
		fmt.Fprintln(os.Stderr, "fakeclaude: KINGDOM_* environment missing")
		os.Exit(65)
	}
	prompt, _ := io.ReadAll(os.Stdin)
	if len(prompt) == 0 {
		fail("empty prompt on stdin")
	}
	c := call{TaskID: id, Args: args, Prompt: string(prompt), HeartbeatPath: os.Getenv("KINGDOM_HEARTBEAT_PATH")}
	c.Cwd, _ = os.Getwd()
	_, c.SlackTokenVisible = os.LookupEnv("SLACK_BOT_TOKEN")
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--resume":
			c.Resume = args[i+1]
		case "--session-id":
			c.SessionID = args[i+1]
		case "--model":
			c.Model = args[i+1]
		}
	}
	record(base, c)
	if sc, ok := readScenario(base, id); ok {
		playScenario(sc, c, resultPath)
		return
	}
	followPayload(base, c, resultPath)
}

// readScenario reads the task's scenario file, else the shared one.
func readScenario(base, id string) (scenario, bool) {
	var sc scenario
	b, err := os.ReadFile(filepath.Join(base, "fake", "scenario-"+id+".json"))
	if err != nil {
		if b, err = os.ReadFile(filepath.Join(base, "fake", "scenario.json")); err != nil {
			return sc, false
		}
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		fail("scenario: " + err.Error())
	}
	return sc, true
}

func playScenario(sc scenario, c call, resultPath string) {
	if sc.SessionID == "" {
		sc.SessionID = "sess-" + c.TaskID
	}
	fmt.Printf(`{"type":"system","subtype":"init","session_id":%q}`+"\n", sc.SessionID)
	if sc.SleepMS > 0 {
		time.Sleep(time.Duration(sc.SleepMS) * time.Millisecond)
	}
	result := func(r map[string]any) {
		r["task_id"] = c.TaskID
		if sc.MemoryUpdates != nil {
			r["memory_updates"] = sc.MemoryUpdates
		}
		writeResult(resultPath, r)
		finish(sc.SessionID, "done")
	}
	switch sc.Mode {
	case "", "success":
		result(map[string]any{"status": "success", "summary": "did it"})
	case "dirty":
		_ = os.WriteFile(filepath.Join(c.Cwd, "dirty.txt"), []byte("left behind"), 0o600)
		_ = os.WriteFile(filepath.Join(c.Cwd, "README.md"), []byte("edited"), 0o600)
		result(map[string]any{"status": "success", "summary": "made a mess"})
	case "needs_human":
		result(map[string]any{"status": "needs_human", "summary": "stuck", "question": "Which branch?"})
	case "bad_status":
		// A staging result that breaks the raw-result schema.
		result(map[string]any{"status": "done", "summary": "finished"})
	case "fail":
		result(map[string]any{"status": "failed", "summary": "could not", "error": "tests broken"})
	case "exit3":
		fmt.Println(`{"type":"assistant","message":"about to fail"}`)
		os.Exit(3)
	case "usage_limit":
		// claude's own words for a usage limit (ENGINES.md): an error result.
		fmt.Printf(`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit · resets 3am (UTC)","session_id":%q}`+"\n", sc.SessionID)
		os.Exit(1)
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "hang_heartbeat":
		for {
			fmt.Println(`{"type":"assistant","message":"still thinking"}`)
			time.Sleep(10 * time.Millisecond)
		}
	case "garbage":
		fmt.Println("%%% not json %%%")
		_ = os.WriteFile(resultPath, []byte("{this is not json"), 0o600)
	default:
		fmt.Fprintf(os.Stderr, "fakeclaude: unknown mode %q\n", sc.Mode)
		os.Exit(2)
	}
}

func followPayload(base string, c call, resultPath string) {
	id := c.TaskID
	if strings.HasPrefix(id, "evt-") {
		gen := "gen-herald"
		if ev := readJSON(filepath.Join(base, "queue", "events", "petitioning", id+".json")); ev != nil {
			if p, ok := ev["payload"].(map[string]any); ok {
				if g, ok := p["petition_general"].(string); ok {
					gen = g
				}
			}
		}
		answer, _ := json.Marshal(map[string]string{"general": gen})
		finish("pet-"+id, string(answer))
		return
	}
	var t task
	if m := readJSON(filepath.Join(base, "queue", "tasks", "in_progress", id+".json")); m != nil {
		b, _ := json.Marshal(m)
		_ = json.Unmarshal(b, &t)
	}
	session := c.SessionID
	fmt.Printf(`{"type":"system","subtype":"init","session_id":%q}`+"\n", session)
	res := map[string]any{"task_id": id}
	switch {
	case t.Type == "resume":
		orig, _ := t.Payload["original_task_id"].(string)
		first := readJSON(filepath.Join(base, "fake-calls", orig+"-0.json"))
		if first == nil || first["session_id"] == "" || c.Resume != first["session_id"] {
			fail(fmt.Sprintf("resume token %q, want the session id of %s's first run (%v)", c.Resume, orig, first))
		}
		session = c.Resume
		res["status"], res["summary"] = "success", fmt.Sprintf("resumed %s with the human's answer", orig)
	case t.Payload["die_first"] == true && t.RetryCount == 0:
		time.Sleep(100 * time.Millisecond)
		_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
		os.Exit(137)
	case t.Payload["hold_file"] != nil:
		for {
			if _, err := os.Stat(filepath.Join(base, fmt.Sprint(t.Payload["hold_file"]))); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		res["status"], res["summary"] = "success", "held, then done"
	case t.Payload["leak"] != nil:
		env, _ := os.ReadFile(filepath.Join(base, "config", "kingdom.env"))
		dump := fmt.Sprintf("GH_TOKEN=%s %s", os.Getenv("GH_TOKEN"), strings.ReplaceAll(string(env), "\n", " "))
		line, _ := json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": dump}}}})
		fmt.Println(string(line))
		fmt.Fprintln(os.Stderr, dump)
		res["status"], res["summary"], res["error"] = "failed", fmt.Sprint(t.Payload["leak"]), fmt.Sprint(t.Payload["leak"])+" "+dump
		res["error_reason"], res["terminal"] = "AgentFailed", true
	case t.Payload["needs_human"] == true:
		res["status"], res["summary"], res["question"] = "needs_human", "blocked on a decision", "Ship it to staging or production?"
	default:
		res["status"], res["summary"] = "success", fmt.Sprintf("handled %s (attempt %d)", t.Type, t.RetryCount)
	}
	writeResult(resultPath, res)
	finish(session, "done")
}

func writeResult(path string, r map[string]any) {
	b, _ := json.Marshal(r)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		fail(err.Error())
	}
}

// finish prints claude's final result line.
func finish(session, text string) {
	line, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": false,
		"result": text, "session_id": session, "usage": map[string]int{"input_tokens": 7, "output_tokens": 3}})
	fmt.Println(string(line))
}

// record writes c as the task's next call file.
func record(base string, c call) {
	dir := filepath.Join(base, "fake-calls")
	_ = os.MkdirAll(dir, 0o700)
	b, _ := json.Marshal(c)
	for n := 0; ; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.json", c.TaskID, n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_, _ = f.Write(b)
			_ = f.Close()
			return
		}
		if !os.IsExist(err) {
			fail("record call: " + err.Error())
		}
	}
}

func readJSON(path string) map[string]any {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "fakeclaude:", msg)
	os.Exit(1)
}
