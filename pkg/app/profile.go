package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// EnvCPUProfileDir names a directory where every Kingdom process writes a
// CPU profile of its whole life (<dir>/<command>-<pid>.pprof), for `go tool
// pprof`. Unset (the default) costs nothing. It is a diagnosis aid for
// operators and for `make bench`, never needed to run.
const EnvCPUProfileDir = "KINGDOM_CPUPROFILE_DIR"

// startProfile starts the CPU profile EnvCPUProfileDir asks for and returns
// the function that ends it; a profile that cannot start is reported on
// stderr and the command runs unprofiled.
func startProfile(name string) func() {
	dir := os.Getenv(EnvCPUProfileDir)
	if dir == "" {
		return func() {}
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid())), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cpu profile: %v\n", name, err)
		if f != nil {
			_ = f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
