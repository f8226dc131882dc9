//go:build crashpoints

package king

import (
	"os"
	"syscall"
	"time"
)

// crashPoint kills the process with SIGKILL when envCrashAt names point
// (crashpoints.go). Only test binaries are built with this file.
func crashPoint(point string) {
	if os.Getenv(envCrashAt) != point {
		return
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// Never continue past the point while the signal is delivered.
	time.Sleep(time.Hour)
}

// crashPoints reports whether this build has crash points (crashHook).
const crashPoints = true
