// Command demo-soldier is the stand-in AI agent of `make demo`, the e2e tests
// and the benchmarks: run by the `command` engine as
//
//	demo-soldier {prompt_file} {workdir} {task_id} {result_path}
//
// it reads its task from the queue, pretends to work for DEMO_SOLDIER_DELAY
// (default 0), and writes a result that follows the soldier result contract:
// a PR review request is reviewed, a DM is answered, a task whose payload asks
// for a human ("needs_human": true, or text mentioning "deploy") asks its
// question, and the resumed task finishes with the human's answer.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type task struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Repo    *string        `json:"repo"`
	Payload map[string]any `json:"payload"`
}

func main() {
	if len(os.Args) < 5 {
		fail(2, "usage: demo-soldier PROMPT_FILE WORKDIR TASK_ID RESULT_PATH")
	}
	promptFile, taskID, resultPath := os.Args[1], os.Args[3], os.Args[4]
	if _, err := os.Stat(promptFile); err != nil {
		fail(2, "prompt file: "+err.Error())
	}
	if d, err := time.ParseDuration(os.Getenv("DEMO_SOLDIER_DELAY")); err == nil {
		time.Sleep(d)
	}
	var res map[string]any
	if filepath.Base(filepath.Dir(resultPath)) == "petition-results" {
		// The king's petition classifier: hand conversations to the herald.
		res = map[string]any{"general": "gen-herald"}
	} else {
		res = decide(readTask(taskID))
		res["task_id"] = taskID
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	// Written in place: the soldier reads the result only after this
	// process has exited (a temp and a rename would only cost more).
	if err := os.WriteFile(resultPath, b, 0o600); err != nil {
		fail(1, err.Error())
	}
	os.Stdout.WriteString(`{"type":"result","session_id":"demo-` + taskID + "\"}\n")
}

func fail(code int, msg string) {
	os.Stderr.WriteString(msg + "\n")
	os.Exit(code)
}

func readTask(id string) task {
	var t task
	base := os.Getenv("KINGDOM_BASE_DIR")
	for _, st := range []string{"in_progress", "pending", "completed"} {
		b, err := os.ReadFile(filepath.Join(base, "queue", "tasks", st, id+".json"))
		if err == nil && json.Unmarshal(b, &t) == nil {
			return t
		}
	}
	t.ID = id
	return t
}

func str(m map[string]any, k string) string {
	if s, ok := m[k].(string); ok {
		return s
	}
	return ""
}

func decide(t task) map[string]any {
	p := t.Payload
	if p == nil {
		p = map[string]any{}
	}
	text := str(p, "text")
	switch {
	case t.Type == "resume":
		answer := str(p, "text")
		if answer == "" {
			answer = str(p, "reply_text")
		}
		return map[string]any{"status": "success", "summary": "Resumed with the human's answer " + strconv.Quote(answer) + " and finished the job."}
	case p["needs_human"] == true || strings.Contains(strings.ToLower(text), "deploy"):
		return map[string]any{"status": "needs_human", "summary": "Ready to deploy, but the target is ambiguous.",
			"question": "Which environment should I deploy to: staging or production?"}
	case strings.HasPrefix(t.Type, "github.pr."), t.Type == "review.requested":
		title := str(p, "subject_title")
		return map[string]any{"status": "success", "summary": "Reviewed " + strconv.Quote(title) + ": 2 suggestions posted, no blocking issues.",
			"memory_updates": []string{"Demo repo PRs are small; review tone: friendly."}}
	case strings.HasPrefix(t.Type, "slack."):
		return map[string]any{"status": "success", "summary": "Hello! You said " + strconv.Quote(text) + ". The kingdom is up; ask me anything."}
	case p["skip"] == true:
		return map[string]any{"status": "skipped", "summary": "Nothing to do.", "reason": "payload asked to skip"}
	}
	return map[string]any{"status": "success", "summary": "Handled " + t.Type + "."}
}
