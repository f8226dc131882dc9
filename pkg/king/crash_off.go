//go:build !crashpoints

package king

// crashPoint does nothing in the shipped king: crash points exist only in
// binaries built with the crashpoints tag (crash.go).
func crashPoint(string) {}

// crashArmed is false: the shipped king has no crash points (crashHook).
func crashArmed(string) bool { return false }
