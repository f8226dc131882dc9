//go:build !crashpoints

package king

// crashPoint does nothing in the shipped king: crash points exist only in
// binaries built with the crashpoints tag (crash.go).
func crashPoint(string) {}

// crashPoints reports whether this build has crash points (crashHook).
const crashPoints = false
