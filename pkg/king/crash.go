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
	if !crashArmed(point) {
		return
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// Never continue past the point while the signal is delivered.
	time.Sleep(time.Hour)
}

// crashArmed reports whether envCrashAt names point: only then does
// crashHook add its step, so a test build run without it commits exactly
// as the shipped king does (the speed benchmarks run test builds).
func crashArmed(point string) bool { return os.Getenv(envCrashAt) == point }
