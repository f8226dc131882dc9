package soldier

import (
	"os"
	"strings"
	"syscall"
)

// A soldier mostly waits on its engine, so its Go runtime runs on one
// processor. Asked for in its environment (GOMAXPROCS=1, set by Launch),
// the runtime starts that way; set from main, it starts with one per core
// — threads spinning up for the first goroutines — and then stops the
// world to drop them (~0.2–0.5 CPU-ms per task, issue #17). The variable
// is the soldier's own: EnvSoldierProcs keeps the value the session would
// have had, and RestoreEnv puts it back before anything reads the
// environment, so an engine whose env_passthrough names GOMAXPROCS sees
// what it saw before.
const (
	envGOMAXPROCS   = "GOMAXPROCS"
	EnvSoldierProcs = "KINGDOM_SOLDIER_GOMAXPROCS"
)

// soldierProcsEnv adds GOMAXPROCS=1 to a soldier session's environment e,
// unless the caller set GOMAXPROCS there itself.
func soldierProcsEnv(e map[string]string) {
	if _, set := e[envGOMAXPROCS]; set {
		return
	}
	prev := "-" // unset
	if v, ok := os.LookupEnv(envGOMAXPROCS); ok {
		prev = "=" + v
	}
	e[envGOMAXPROCS], e[EnvSoldierProcs] = "1", prev
}

// RestoreEnv undoes soldierProcsEnv in the soldier's own process (the
// runtime has read GOMAXPROCS by then); without its mark it does nothing.
func RestoreEnv() {
	prev, ok := os.LookupEnv(EnvSoldierProcs)
	if !ok {
		return
	}
	_ = os.Unsetenv(EnvSoldierProcs)
	if v, set := strings.CutPrefix(prev, "="); set {
		_ = os.Setenv(envGOMAXPROCS, v)
	} else {
		_ = os.Unsetenv(envGOMAXPROCS)
	}
}

// stopSignals end a soldier: tmux kill-session's SIGHUP, and SIGTERM or
// SIGINT from an operator.
var stopSignals = []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT}
