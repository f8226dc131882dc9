// fakeclaude stands in for the claude CLI in the end-to-end tests. It checks
// the argv of SPEC §9.16, reads the prompt from stdin, records each call in
// $KINGDOM_BASE_DIR/fake-calls/<task>-<n>.json, prints stream-json lines, and
// behaves by its task's payload:
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

type task struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	RetryCount int            `json:"retry_count"`
	Payload    map[string]any `json:"payload"`
}

func main() {
	args := os.Args[1:]
	for i, w := range []string{"-p", "--output-format", "stream-json", "--verbose"} {
		if i >= len(args) || args[i] != w {
			fmt.Fprintf(os.Stderr, "fakeclaude: bad argv %q\n", args)
			os.Exit(64)
		}
	}
	resume, sessionID := "", ""
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--resume":
			resume = args[i+1]
		case "--session-id":
			sessionID = args[i+1]
		}
	}
	base, id, resultPath := os.Getenv("KINGDOM_BASE_DIR"), os.Getenv("KINGDOM_TASK_ID"), os.Getenv("KINGDOM_RESULT_PATH")
	prompt, _ := io.ReadAll(os.Stdin)
	if len(prompt) == 0 {
		fail("empty prompt on stdin")
	}
	record(base, id, args, resume, sessionID)
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
		json.Unmarshal(b, &t)
	}
	session := sessionID
	fmt.Printf(`{"type":"system","subtype":"init","session_id":%q}`+"\n", session)
	res := map[string]any{"task_id": id}
	switch {
	case t.Type == "resume":
		orig, _ := t.Payload["original_task_id"].(string)
		first := readJSON(filepath.Join(base, "fake-calls", orig+"-0.json"))
		if first == nil || first["session_id"] == "" || resume != first["session_id"] {
			fail(fmt.Sprintf("resume token %q, want the session id of %s's first run (%v)", resume, orig, first))
		}
		session = resume
		res["status"], res["summary"] = "success", fmt.Sprintf("resumed %s with the human's answer", orig)
	case t.Payload["die_first"] == true && t.RetryCount == 0:
		time.Sleep(100 * time.Millisecond)
		syscall.Kill(os.Getppid(), syscall.SIGKILL)
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
	b, _ := json.Marshal(res)
	if err := os.WriteFile(resultPath, b, 0o600); err != nil {
		fail(err.Error())
	}
	finish(session, "done")
}

func finish(session, text string) {
	line, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": false,
		"result": text, "session_id": session, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5}})
	fmt.Println(string(line))
}

func record(base, id string, args []string, resume, sessionID string) {
	dir := filepath.Join(base, "fake-calls")
	os.MkdirAll(dir, 0o700)
	cwd, _ := os.Getwd()
	b, _ := json.Marshal(map[string]any{"task_id": id, "argv": args, "resume": resume, "session_id": sessionID, "cwd": cwd})
	for n := 0; ; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.json", id, n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Write(b)
			f.Close()
			return
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
