package king

import (
	"os"
	"syscall"
	"time"
)

// EnvCrashAt names a point at which the king kills itself with SIGKILL. It
// exists only so tests can prove crash idempotency with a real killed
// process; it is read once, at New. Points:
//
//	after-event-dispatched   event written to dispatched/, pending copy still there
//	after-task-write         task written, event's pending copy gone, no thread_start yet
//	after-completion-message completion message queued, task and event not yet moved
//	in-dispatch-batch        first dispatched copy of a batch renamed, the others not (batch.go)
//	in-result-batch          first message of a results batch renamed, the others not (resultbatch.go)
const EnvCrashAt = "KINGDOM_KING_CRASH_AT"

// Crash points.
const (
	CrashAfterEventDispatched   = "after-event-dispatched"
	CrashAfterTaskWrite         = "after-task-write"
	CrashAfterCompletionMessage = "after-completion-message"
)

func (k *King) crash(point string) {
	if k.crashAt == point {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		// Never continue past the point while the signal is delivered.
		time.Sleep(time.Hour)
	}
}
