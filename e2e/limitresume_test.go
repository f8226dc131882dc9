package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// resumeAfterLimit: a question's resume that meets a usage limit waits for
// the reset and then resumes the same claude session in the same, kept
// workdir (SPEC §10.5, §10.8) — not a SessionLost ❌. It runs last in
// TestUsageLimits_RealEnginesPauseAndResume: it pauses claude once more.
func resumeAfterLimit(t *testing.T, k *Kingdom, gate *limitGate, model *modelfake.Server) {
	ask, answer := "SCEN-LIM-RESUME-ASK", "SCEN-LIM-RESUME-ANSWER"
	model.Script(ask, modelfake.Turns(
		modelfake.Tool("StructuredOutput", map[string]any{"status": "needs_human", "summary": "blocked", "question": "Which branch?"}),
		modelfake.Tool("StructuredOutput", map[string]any{"status": "success", "summary": "resumed after the reset " + ask}),
	))
	k.DropInbox("resume-ask", map[string]any{"id": "evt-resume-ask", "type": "test.claude", "priority": "high",
		"payload": map[string]any{"text": ask + " please work"}})
	var task string
	k.Eventually("the question of "+ask, limitWait, func() bool {
		tk := k.TaskForEvent("evt-resume-ask")
		if tk == nil || !k.Tasks.Exists(layout.Completed, tk.ID) {
			return false
		}
		task = tk.ID
		return true
	})
	first := k.Result(task)
	if first == nil || first.Status != doc.ResultNeedsHuman || first.SessionID == "" {
		t.Fatalf("first result %+v, want needs_human with a session", first)
	}

	// The answer's request is limited until a reset a minute or so ahead.
	reset := time.Now().Add(50 * time.Second).Truncate(time.Minute).Add(time.Minute)
	gate.setUntil("claude-resume", reset)
	gate.limit("claude-resume", answer, limitReply{status: 429,
		body: anthropicError("rate_limit_error", fmt.Sprintf("Claude AI usage limit reached|%d", reset.Unix()))})
	for try := 0; ; try++ {
		cmd := exec.Command(filepath.Join(binDir, "envoy"), "reply", "--base-dir", k.L.Base, task, answer+": the main branch")
		cmd.Env = append(cleanEnv(), "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket, "KINGDOM_BASE_DIR="+k.L.Base)
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		if try == 60 || !bytes.Contains(out, []byte("not waiting for a reply")) {
			t.Fatalf("envoy reply: %v: %s", err, out)
		}
		time.Sleep(500 * time.Millisecond) // the envoy posts the question, then awaits the reply
	}
	var resume *doc.Task
	k.Eventually("the resume held by the limit", limitWait, func() bool {
		for _, tk := range k.TaskList(layout.Pending) {
			if tk.Type == doc.TaskTypeResume && tk.OriginalTaskID == task && tk.NotBefore != "" {
				tk := tk
				resume = &tk
				return true
			}
		}
		return false
	})
	if resume.UsageLimits != 1 || resume.RetryCount != 0 {
		t.Errorf("held resume: usage_limits %d, retry_count %d, want 1 and 0", resume.UsageLimits, resume.RetryCount)
	}
	k.Eventually("the resume completed after the reset", limitWait, func() bool {
		return k.Tasks.Exists(layout.Completed, resume.ID)
	})
	r := k.Result(resume.ID)
	if r == nil || r.Status != doc.ResultSuccess || !strings.Contains(r.Summary, "resumed after the reset") {
		t.Fatalf("resume result %+v, want success after the reset (not SessionLost)", r)
	}
	if r.SessionID != first.SessionID {
		t.Errorf("resumed session %q, want the question's %q", r.SessionID, first.SessionID)
	}
	if reqs := gate.requests(answer); len(reqs) < 2 || reqs[len(reqs)-1].Before(reset) {
		t.Errorf("answer requests at %v, want a limited one and one after the reset %s", reqs, reset)
	}
}
