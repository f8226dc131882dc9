package general

import (
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// A resume attempt that fails retryably (EngineError, which the king
// retries; UsageLimited, which it re-queues after the pause) keeps the
// borrowed workdir, or the next attempt is SessionLost. A terminal failure
// of the resume still removes it.
func TestResumeRetryableFailureKeepsWorkdir(t *testing.T) {
	cases := []struct {
		mode, reason string
		kept         bool
	}{
		{"exit3", doc.ReasonEngineError, true},
		{"usage_limit", doc.ReasonUsageLimited, true},
		{"fail", "", false},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			e := newEnv(t)
			e.scenario("task-20260101-010", map[string]any{"mode": "needs_human", "session_id": "5e55a0b1-0000-4000-8000-000000000001"})
			e.start()
			e.task("task-20260101-010", func(t *doc.Task) {
				t.Payload = map[string]any{"channel": "D1", "ts": "1700000000.000100", "text": "help"}
			})
			r := e.final("task-20260101-010")
			b, err := os.ReadFile(r.CheckpointPath)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := schema.DecodeCheckpoint(b)
			if err != nil {
				t.Fatal(err)
			}
			e.scenario("task-20260101-011", map[string]any{"mode": c.mode, "session_id": cp.SessionID})
			e.task("task-20260101-011", func(t *doc.Task) {
				t.Type = doc.TaskTypeResume
				t.SessionID = cp.SessionID
				t.Workdir = cp.Workdir
				t.OriginalTaskID = "task-20260101-010"
				t.Thread = cp.Thread
			})
			r2 := e.final("task-20260101-011")
			if r2.Status != doc.ResultFailed || (c.reason != "" && r2.ErrorReason != c.reason) {
				t.Fatalf("resume result = %s/%s, want failed/%s", r2.Status, r2.ErrorReason, c.reason)
			}
			_, err = os.Stat(cp.Workdir)
			if c.kept && err != nil {
				t.Fatalf("workdir of a retryable resume failure removed: %v (the retry would be SessionLost)", err)
			}
			if !c.kept && err == nil {
				t.Fatalf("workdir %s of a terminally failed resume kept", cp.Workdir)
			}
		})
	}
}
