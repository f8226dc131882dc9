// fakeclaude stands in for the claude CLI in tests. It checks its argv
// against SPEC §9.16, reads the prompt from stdin, records the call in
// $KINGDOM_BASE_DIR/fake/calls/<task>.json and behaves as the scenario file
// $KINGDOM_BASE_DIR/fake/scenario-<task>.json (else fake/scenario.json)
// says. Invoked as `fakeclaude command <task_id> <result_path>` it is an
// instant command engine (benchmarks).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

type scenario struct {
	Mode          string   `json:"mode"` // success|needs_human|fail|exit3|usage_limit|hang|hang_heartbeat|garbage|dirty
	SessionID     string   `json:"session_id"`
	SleepMS       int      `json:"sleep_ms"`
	MemoryUpdates []string `json:"memory_updates"`
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "command" {
		res := map[string]any{"task_id": os.Args[2], "status": "success", "summary": "instant"}
		b, _ := json.Marshal(res)
		if err := os.WriteFile(os.Args[3], b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	want := []string{"-p", "--output-format", "stream-json", "--verbose"}
	args := os.Args[1:]
	for i, w := range want {
		if i >= len(args) || args[i] != w {
			fmt.Fprintf(os.Stderr, "fakeclaude: bad argv %q\n", args)
			os.Exit(64)
		}
	}
	base := os.Getenv("KINGDOM_BASE_DIR")
	task := os.Getenv("KINGDOM_TASK_ID")
	resultPath := os.Getenv("KINGDOM_RESULT_PATH")
	if base == "" || task == "" || resultPath == "" {
		fmt.Fprintln(os.Stderr, "fakeclaude: KINGDOM_* environment missing")
		os.Exit(65)
	}
	prompt, _ := io.ReadAll(os.Stdin)
	cwd, _ := os.Getwd()
	var resume, model string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--resume":
			resume = args[i+1]
		case "--model":
			model = args[i+1]
		}
	}
	_, slack := os.LookupEnv("SLACK_BOT_TOKEN")
	call := map[string]any{"args": args, "cwd": cwd, "prompt": string(prompt), "resume": resume, "model": model,
		"slack_token_visible": slack, "heartbeat_path": os.Getenv("KINGDOM_HEARTBEAT_PATH")}
	calls := filepath.Join(base, "fake", "calls")
	_ = os.MkdirAll(calls, 0o700)
	b, _ := json.Marshal(call)
	_ = os.WriteFile(filepath.Join(calls, task+".json"), b, 0o600)

	var sc scenario
	sb, err := os.ReadFile(filepath.Join(base, "fake", "scenario-"+task+".json"))
	if err != nil {
		sb, _ = os.ReadFile(filepath.Join(base, "fake", "scenario.json"))
	}
	_ = json.Unmarshal(sb, &sc)
	if sc.SessionID == "" {
		sc.SessionID = "sess-" + task
	}
	fmt.Printf(`{"type":"system","subtype":"init","session_id":%q}`+"\n", sc.SessionID)
	if sc.SleepMS > 0 {
		time.Sleep(time.Duration(sc.SleepMS) * time.Millisecond)
	}
	result := func(r map[string]any) {
		r["task_id"] = task
		if sc.MemoryUpdates != nil {
			r["memory_updates"] = sc.MemoryUpdates
		}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(resultPath, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf(`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":%q,"usage":{"input_tokens":7,"output_tokens":3}}`+"\n", sc.SessionID)
	}
	switch sc.Mode {
	case "", "success":
		result(map[string]any{"status": "success", "summary": "did it"})
	case "dirty":
		_ = os.WriteFile(filepath.Join(cwd, "dirty.txt"), []byte("left behind"), 0o600)
		_ = os.WriteFile(filepath.Join(cwd, "README.md"), []byte("edited"), 0o600)
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
