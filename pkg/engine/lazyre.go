package engine

import (
	"regexp"
	"sync"
)

// lazyRE compiles expr on first use. Every soldier-spawn links this
// package but most runs never look at an engine's error text; compiling
// its expressions at init cost each process start 0.25 ms
// (GODEBUG=inittrace=1).
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
