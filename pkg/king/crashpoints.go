package king

import "github.com/kingdom-dev/kingdom/pkg/queue"

// Crash points are instants inside the §9.2 dispatch's and a completion's
// transaction: a king killed there must leave none of it visible, and a
// restart does it once. A king built with the
// `crashpoints` build tag (crash.go) SIGKILLs itself at the point named by
// the environment variable envCrashAt, so tests can prove with a really
// killed process that a restart finishes the work once; the shipped king
// (crash_off.go) has no such hook. The names live in every build so tests
// can name them.
const envCrashAt = "KINGDOM_KING_CRASH_AT"

const (
	// The event staged into dispatched/, its pending copy still there.
	crashAfterEventDispatched = "after-event-dispatched"
	// The task staged, the event's pending copy gone, no thread_start yet.
	crashAfterTaskWrite = "after-task-write"
	// The completion message staged, task and event not yet moved.
	crashAfterCompletionMessage = "after-completion-message"
)

// crashHook puts crash point point at this place of g's order when it is
// armed. Otherwise (the shipped king, and a test build not asked to crash)
// it adds nothing.
func (k *King) crashHook(g *queue.GroupTx, point string) {
	if crashArmed(point) {
		g.Then(func() { crashPoint(point) })
	}
}
